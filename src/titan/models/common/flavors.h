// A family's flavors: named model arguments, as TorchTitan's `<family>_args` tables.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/models/common/transformer_args.h"

namespace titan::models {

/// Flavor name -> model arguments, in the order `titan` lists them.
using FlavorTable = std::vector<std::pair<std::string, TransformerArgs>>;

/// The arguments of `flavor` in `table`; throws ConfigError naming model.flavor, the family
/// and the valid flavors.
TransformerArgs find_flavor(const FlavorTable& table, const std::string& family,
                            const std::string& flavor);

}  // namespace titan::models
