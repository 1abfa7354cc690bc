#include "titan/models/common/pipeline_split.h"

#include <fmt/format.h>

#include "titan/errors.h"

namespace titan::models {
namespace {

void check_split(int64_t n_layers, const PipelineSplit& s, int64_t per_stage) {
  const int64_t effective = n_layers + s.input_weight + s.output_weight;
  if (s.num_stages > effective) {
    throw ConfigError(fmt::format(
        "{} pipeline stages cannot share {} layers ({} blocks + the embedding counted as {} + "
        "the norm and output counted as {}): use fewer stages",
        s.num_stages, effective, n_layers, s.input_weight, s.output_weight));
  }
  if (s.input_weight > per_stage || s.output_weight > per_stage) {
    throw ConfigError(fmt::format(
        "the embedding counted as {} layers and the norm and output as {} must each fit in the "
        "{} layers per stage of {} stages over {} layers: use fewer stages or lighter weights",
        s.input_weight, s.output_weight, per_stage, s.num_stages, effective));
  }
}

}  // namespace

std::vector<PartRange> split_for_pipeline(int64_t n_layers, const PipelineSplit& s) {
  if (s.num_stages < 1) {
    throw ConfigError(fmt::format("a pipeline needs at least one stage, got {}", s.num_stages));
  }
  if (s.num_stages == 1) return {PartRange{0, n_layers, true, true}};
  const int64_t effective = n_layers + s.input_weight + s.output_weight;
  const int64_t per_stage = effective / s.num_stages, extra = effective % s.num_stages;
  check_split(n_layers, s, per_stage);
  std::vector<PartRange> stages;
  int64_t next = 0;
  for (int64_t stage = 0; stage < s.num_stages; ++stage) {
    const bool first = stage == 0, last = stage == s.num_stages - 1;
    int64_t blocks = per_stage + (stage < extra ? 1 : 0);
    if (first) blocks -= s.input_weight;
    if (last) blocks -= s.output_weight;
    const int64_t end = std::min(n_layers, next + blocks);
    stages.push_back(PartRange{next, end, first, last});
    next = end;
  }
  return stages;
}

}  // namespace titan::models
