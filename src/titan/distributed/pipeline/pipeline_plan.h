// How a job's model is cut into pipeline stages and scheduled (the metadata step of
// TorchTitan's pipeline_llm): stages per rank from the schedule (1 for GPipe and 1F1B, 2 for
// Interleaved1F1B and ZBVZeroBubble) or from parallelism.pipeline_parallel_layers_per_stage,
// the split of the layers with the embedding and the output counted as
// pipeline_parallel_first/last_stage_less_layers, and the microbatches of a local batch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/distributed/pipeline/schedule.h"
#include "titan/models/common/pipeline_split.h"

namespace titan::distributed::pipeline {

/// A family's splitter (TrainSpec::pipeline_split for the job's flavor).
using SplitFn = std::function<std::vector<models::PartRange>(const models::PipelineSplit&)>;

struct PipelinePlan {
  Schedule schedule;                       // checked: runs to completion (check_schedule)
  std::vector<models::PartRange> stages;   // every stage's pieces, in stage order
  int64_t microbatch_size = 1;             // sequences per microbatch

  /// The pp rank holding the last stage (it computes the loss): pp - 1, or 0 for the V.
  int last_stage_rank() const { return schedule.rank_of_stage(schedule.num_stages - 1); }
};

/// The plan of `job` over `pp` pipeline ranks. Throws ConfigError naming the key when
/// training.local_batch_size does not divide by parallelism.pipeline_parallel_microbatch_size,
/// when pipeline_parallel_layers_per_stage gives a stage count that pp does not divide or that
/// the schedule cannot run, when the model has fewer layers than stages, or as build_schedule.
PipelinePlan plan_pipeline(const config::JobConfig& job, int pp, const SplitFn& split);

}  // namespace titan::distributed::pipeline
