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

ConfigError fqn_error(const std::string& why) {
  return ConfigError("parallelism.module_fqns_per_model_part: " + why);
}

// Stage `index` of `stages` named by `names`, whose blocks start at `next`.
PartRange named_stage(const std::vector<std::string>& names, size_t index, size_t stages,
                      int64_t next, int64_t n_layers) {
  PartRange p{next, next, false, false};
  bool norm = false, output = false;
  for (const auto& name : names) {
    if (name == "tok_embeddings") {
      p.embedding = true;
    } else if (name == "norm") {
      norm = true;
    } else if (name == "output" || name == "lm_head") {
      output = true;
    } else if (name.rfind("layers.", 0) == 0 &&
               name.find_first_not_of("0123456789", 7) == std::string::npos && name.size() > 7) {
      const int64_t layer = std::stoll(name.substr(7));
      if (layer >= n_layers) {
        throw fqn_error(fmt::format("stage {}: {} is past the model's {} blocks (layers.0 .. "
                                    "layers.{})",
                                    index, name, n_layers, n_layers - 1));
      }
      if (layer != p.end_layer) {
        throw fqn_error(fmt::format("stage {} lists {} where layers.{} comes next (each of the "
                                    "{} blocks once, in order)",
                                    index, name, p.end_layer, n_layers));
      }
      ++p.end_layer;
    } else {
      throw fqn_error(fmt::format("stage {}: '{}' is not a module of the model (valid: "
                                  "tok_embeddings, layers.0 .. layers.{}, norm, output or lm_head)",
                                  index, name, n_layers - 1));
    }
  }
  if (norm != output) {
    throw fqn_error(fmt::format("stage {} holds {} without {}: the final norm and the output "
                                "go together",
                                index, norm ? "norm" : "output", norm ? "output" : "norm"));
  }
  p.output = norm;
  if (!p.embedding && !p.output && p.end_layer == p.first_layer) {
    throw fqn_error(fmt::format("stage {} holds no module; every stage needs at least one",
                                index));
  }
  if (p.embedding != (index == 0)) {
    throw fqn_error(fmt::format("tok_embeddings must be in the first stage, and only there "
                                "(stage {})",
                                index));
  }
  if (p.output != (index + 1 == stages)) {
    throw fqn_error(fmt::format("norm and output must be in the last stage, and only there "
                                "(stage {})",
                                index));
  }
  return p;
}

std::vector<PartRange> split_by_names(int64_t n_layers,
                                      const std::vector<std::vector<std::string>>& stages) {
  std::vector<PartRange> out;
  int64_t next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    out.push_back(named_stage(stages[i], i, stages.size(), next, n_layers));
    next = out.back().end_layer;
  }
  if (next != n_layers) {
    throw fqn_error(fmt::format("the stages hold layers.0 .. layers.{} of the model's {} blocks",
                                next - 1, n_layers));
  }
  return out;
}

}  // namespace

std::vector<PartRange> split_for_pipeline(int64_t n_layers, const PipelineSplit& s) {
  if (!s.module_names.empty()) return split_by_names(n_layers, s.module_names);
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
