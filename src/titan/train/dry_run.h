// COMM_MODE=fake_backend: checks a config for a world of N ranks in one process, without
// collectives, and prints the resolved layout.
#pragma once

#include <ostream>

#include "titan/config/job_config.h"

namespace titan::train {

/// Validates `job` for `world_size` ranks and prints the mesh, the data-parallel batch
/// split and the tokens per step. Returns the exit code (0). Throws ConfigError when the
/// layout is impossible.
int dry_run(const config::JobConfig& job, int world_size, std::ostream& out);

}  // namespace titan::train
