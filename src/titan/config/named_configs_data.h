// Declares the table that CMake generates from the train_configs/*.toml files.
#pragma once

#include <vector>

#include "titan/config/named_configs.h"

namespace titan::config {
std::vector<NamedConfig> embedded_named_configs();
}
