#include "titan/distributed/pipeline/pipeline_plan.h"

#include <fmt/format.h>

#include <stdexcept>

#include "titan/errors.h"

namespace titan::distributed::pipeline {
namespace {

int stages_per_rank(const config::ParallelismSection& p, ScheduleKind kind, int64_t n_layers,
                    int pp) {
  const auto named = static_cast<int64_t>(p.module_fqns_per_model_part.size());
  if (named > 0 && p.pipeline_parallel_layers_per_stage) {
    throw ConfigError("parallelism.module_fqns_per_model_part and "
                      "parallelism.pipeline_parallel_layers_per_stage both say how to split the "
                      "pipeline: set one of them");
  }
  if (named > 0) {
    if (named % pp != 0) {
      throw ConfigError(fmt::format("parallelism.module_fqns_per_model_part lists {} stages, "
                                    "which the {} pipeline ranks do not divide",
                                    named, pp));
    }
    return static_cast<int>(named / pp);
  }
  if (!p.pipeline_parallel_layers_per_stage) return is_multi_stage(kind) ? 2 : 1;
  const int64_t per_stage = *p.pipeline_parallel_layers_per_stage;
  const int64_t effective = n_layers + p.pipeline_parallel_first_stage_less_layers +
                            p.pipeline_parallel_last_stage_less_layers;
  const int64_t stages = (effective + per_stage - 1) / per_stage;
  if (stages % pp != 0) {
    throw ConfigError(fmt::format(
        "parallelism.pipeline_parallel_layers_per_stage = {} cuts {} layers ({} blocks + the "
        "embedding and output counted as {} and {}) into {} stage(s), which the {} pipeline ranks "
        "do not divide; choose a value giving a multiple of {} stages",
        per_stage, effective, n_layers, p.pipeline_parallel_first_stage_less_layers,
        p.pipeline_parallel_last_stage_less_layers, stages, pp, pp));
  }
  return static_cast<int>(stages / pp);
}

}  // namespace

PipelinePlan plan_pipeline(const config::JobConfig& job, int pp, const SplitFn& split) {
  const auto& p = job.parallelism;
  const int64_t local = job.training.local_batch_size, mbs = p.pipeline_parallel_microbatch_size;
  if (local % mbs != 0) {
    throw ConfigError(fmt::format("training.local_batch_size = {} must be divisible by "
                                  "parallelism.pipeline_parallel_microbatch_size = {}",
                                  local, mbs));
  }
  const auto kind = parse_schedule(p.pipeline_parallel_schedule);
  const int64_t n_layers = split(models::PipelineSplit{}).front().end_layer;
  const int spr = stages_per_rank(p, kind, n_layers, pp);
  PipelinePlan plan{{}, {}, mbs};
  try {
    plan.schedule = build_schedule(kind, pp, spr, static_cast<int>(local / mbs));
  } catch (const ConfigError& e) {
    if (!p.module_fqns_per_model_part.empty()) {
      throw ConfigError(fmt::format("{} (parallelism.module_fqns_per_model_part gives {} "
                                    "stage(s) per rank)",
                                    e.what(), spr));
    }
    if (!p.pipeline_parallel_layers_per_stage) throw;
    throw ConfigError(fmt::format("{} (parallelism.pipeline_parallel_layers_per_stage = {} gives "
                                  "{} stage(s) per rank)",
                                  e.what(), *p.pipeline_parallel_layers_per_stage, spr));
  }
  try {
    plan.stages = split(models::PipelineSplit{pp * spr, p.pipeline_parallel_first_stage_less_layers,
                                              p.pipeline_parallel_last_stage_less_layers,
                                              p.module_fqns_per_model_part});
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("parallelism.pipeline_parallel_degree = {} with {} stage(s) per "
                                  "rank ({}): {}",
                                  pp, spr, schedule_name(kind), e.what()));
  }
  check_schedule(plan.schedule);
  return plan;
}

}  // namespace titan::distributed::pipeline
