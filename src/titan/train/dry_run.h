// COMM_MODE=fake_backend: checks a config for a world of N ranks in one process, without
// collectives, and prints the resolved layout, the model size and a per-rank memory estimate.
// The model is built on the meta device: nothing is allocated, so any flavor plans in seconds.
#pragma once

#include <ostream>

#include "titan/config/job_config.h"

namespace titan::train {

/// Validates `job` for `world_size` ranks and prints the mesh, the data-parallel batch split,
/// the tokens per step, the parameter count (total and per rank) and the per-rank memory
/// estimate of tools::plan_layout (GiB = 2^30 bytes). Returns the exit code (0). Throws
/// ConfigError when the layout is impossible or the model family / flavor is unknown.
int dry_run(const config::JobConfig& job, int world_size, std::ostream& out);

}  // namespace titan::train
