// Autoregressive decoding and prompt scoring for any CausalLM (TorchTitan's
// scripts/generate: greedy at temperature 0, otherwise temperature-scaled top-k sampling).
// Each step re-runs the full forward over prompt + generated ids (no KV cache), so a step
// costs one forward of the current length: meant for checks and small models.
#pragma once

#include <cstdint>
#include <vector>

#include "titan/models/common/causal_lm.h"

namespace titan::models {

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  double temperature = 0.0;  // 0 = greedy (argmax, lowest id on ties)
  int64_t top_k = 0;         // sample among the k most likely ids; 0 = all
  uint64_t seed = 0;         // sampling generator seed
};

/// The `max_new_tokens` ids that follow `prompt` (ids in [0, vocab), at least one). No stop
/// token. Runs without autograd, in the model's dtype and on its device.
/// Throws ConfigError for an empty prompt, an id outside the vocabulary or a negative option.
std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options);

/// Mean natural-log cross-entropy of predicting ids[1:] from positions 0..n-2 (at least two
/// ids). Throws ConfigError for fewer than two ids or an id outside the vocabulary.
double prompt_loss(CausalLM& model, const std::vector<int64_t>& ids);

}  // namespace titan::models
