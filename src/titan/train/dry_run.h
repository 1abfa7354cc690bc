// COMM_MODE=fake_backend: checks a config for a world of N ranks in one process, without
// collectives, and prints the resolved layout, the model size and a per-rank memory estimate.
// The model is built on the meta device: nothing is allocated, so any flavor plans in seconds.
#pragma once

#include <ostream>

#include "titan/config/job_config.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/protocols/train_spec.h"
#include "titan/tools/plan.h"

namespace titan::train {

/// One pipeline rank's stages ("stage 0 (embedding, blocks [0, 4), 2 microbatch(es) in
/// flight)", ...) and their plan together.
struct PipelineRankPlan {
  std::string stages;
  tools::LayoutPlan plan;
};
/// Under pipeline parallelism: each pipeline rank's stages planned for the schedule's
/// microbatch size and the microbatches it keeps in flight (built on the meta device).
std::vector<PipelineRankPlan> plan_pipeline_ranks(const protocols::TrainSpec& spec,
                                                  const config::JobConfig& job,
                                                  const distributed::ParallelDims& dims);

/// The plan of the rank holding the most when `job` runs on `world_size` ranks (validating
/// it as the dry run does: throws ConfigError for a layout the model or batch cannot take).
tools::LayoutPlan plan_heaviest_rank(const config::JobConfig& job, int world_size);

/// Validates `job` for `world_size` ranks and prints the mesh, the data-parallel batch split,
/// the tokens per step, the parameter count (total and per rank) and the per-rank memory
/// estimate of tools::plan_layout (GiB = 2^30 bytes). Returns the exit code (0). Throws
/// ConfigError when the layout is impossible or the model family / flavor is unknown.
int dry_run(const config::JobConfig& job, int world_size, std::ostream& out);

}  // namespace titan::train
