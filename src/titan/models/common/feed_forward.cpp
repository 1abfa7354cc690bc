#include "titan/models/common/feed_forward.h"

#include <fmt/format.h>

#include "titan/errors.h"

namespace titan::models {

int64_t ffn_hidden_dim(int64_t dim, int64_t multiple_of, std::optional<double> ffn_dim_multiplier) {
  if (dim <= 0 || multiple_of <= 0) {
    throw ConfigError(fmt::format(
        "feed-forward sizing needs dim > 0 and multiple_of > 0, got dim {} and multiple_of {}",
        dim, multiple_of));
  }
  int64_t hidden = 2 * (4 * dim) / 3;
  if (ffn_dim_multiplier) {
    hidden = static_cast<int64_t>(*ffn_dim_multiplier * static_cast<double>(hidden));
  }
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

FeedForwardImpl::FeedForwardImpl(int64_t dim, int64_t hidden_dim,
                                 const torch::TensorOptions& options)
    : hidden_dim(hidden_dim),
      w1(register_module("w1", Linear(dim, hidden_dim, options))),
      w2(register_module("w2", Linear(hidden_dim, dim, options))),
      w3(register_module("w3", Linear(dim, hidden_dim, options))) {}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x_in) {
  auto x = hooks.on_input(x_in);   // x: [B, S, dim]
  auto hidden = gate({w1(x), w3(x)}, [](const std::vector<torch::Tensor>& in) {
    return torch::silu(in[0]) * in[1];  // [B, S, hidden]
  });
  return hooks.on_output(w2(hidden));  // [B, S, dim]
}

std::vector<ShardedSize> FeedForwardImpl::tensor_parallel_sizes() const {
  return {{"feed-forward hidden width", hidden_dim}};
}

SavedElements FeedForwardImpl::saved_elements(bool op_level) const {
  return {0, (op_level ? 2 : 4) * hidden_dim};
}

int64_t FeedForwardImpl::flops_per_token(int64_t) const { return 6 * num_params(); }

}  // namespace titan::models
