// How a decoder-only model is cut into pipeline stages (TorchTitan's default split,
// generate_llm_fqn_per_model_part): the embedding counts as `input_weight` layers and the final
// norm + output as `output_weight` layers (TorchTitan's first/last_stage_less_layers, default 1
// each; their keys come with pipeline parallelism); these effective layers are spread evenly
// over the stages, the first stages taking one more when they do not divide. Stage 0 holds the embedding
// and its share of blocks, the last stage its blocks and the norm + output, the others blocks
// only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/models/common/causal_lm.h"

namespace titan::models {

struct PipelineSplit {
  int64_t num_stages = 1;    // all stages over all pp ranks (virtual stages included)
  int64_t input_weight = 1;  // layers the embedding counts as
  int64_t output_weight = 1;  // layers the final norm + output count as
  /// An explicit split instead (TorchTitan's module_fqns_per_model_part): each stage's module
  /// names, "tok_embeddings", "layers.N", "norm", "output" (or newer TorchTitan's "lm_head"),
  /// in stage order. num_stages and the weights are then ignored.
  std::vector<std::vector<std::string>> module_names;
};

/// The pieces of each stage of a model with `n_layers` blocks, in stage order; one stage holds
/// the whole model. Throws ConfigError naming the numbers when num_stages < 1, when there are
/// more stages than effective layers, or when input_weight or output_weight exceeds the layers
/// per stage; for module_names, naming parallelism.module_fqns_per_model_part and the module
/// when a name is unknown, when the blocks are not each in one stage in order (stage i's
/// blocks follow stage i - 1's), or when tok_embeddings is not in the first stage or norm and
/// output not in the last. A model with tied embeddings has no "output" module.
std::vector<PartRange> split_for_pipeline(int64_t n_layers, const PipelineSplit& split);

}  // namespace titan::models
