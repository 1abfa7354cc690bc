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

torch::Tensor CausalLM::forward(const torch::Tensor& tokens) {
  return run_wrapped(model_wrappers_, -1, tokens,
                     [this](const torch::Tensor& t) { return forward_impl(t); });
}

torch::Tensor CausalLM::run_block(int64_t layer, const torch::Tensor& x, const TensorFn& block) {
  return run_wrapped(block_wrappers_, layer, x, block);
}

torch::Tensor CausalLM::run_wrapped(const std::vector<Wrapper>& wrappers, int64_t layer,
                                    const torch::Tensor& x, const TensorFn& inner) {
  TensorFn fn = inner;
  for (const auto& w : wrappers) {
    fn = [w, layer, fn](const torch::Tensor& input) { return w(layer, input, fn); };
  }
  return fn(x);
}

}  // namespace titan::models
