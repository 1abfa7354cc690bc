#include "titan/models/common/causal_lm.h"

#include <unordered_set>

namespace titan::models {

int64_t CausalLM::num_params() {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  for (const auto& p : parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) {
      total += p.numel();
    }
  }
  return total;
}

int64_t CausalLM::flops_per_token(int64_t seq_len) {
  const ModelShape s = shape();
  return 6 * (num_params() - num_embedding_params()) +
         12 * s.n_layers * s.n_heads * s.head_dim * seq_len;
}

}  // namespace titan::models
