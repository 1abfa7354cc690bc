#include "titan/models/common/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"
#include "titan/models/common/rope.h"

namespace titan::models {

AttentionImpl::AttentionImpl(const AttentionOptions& opts, const torch::TensorOptions& tensor_options)
    : options(opts) {
  if (opts.n_heads <= 0 || opts.n_kv_heads <= 0 || opts.n_heads % opts.n_kv_heads != 0) {
    throw ConfigError(fmt::format(
        "attention needs n_heads to be a positive multiple of n_kv_heads, got n_heads {} and "
        "n_kv_heads {}",
        opts.n_heads, opts.n_kv_heads));
  }
  const int64_t q_width = opts.n_heads * opts.head_dim;
  const int64_t kv_width = opts.n_kv_heads * opts.head_dim;
  wq = register_module("wq", Linear(opts.dim, q_width, tensor_options));
  wk = register_module("wk", Linear(opts.dim, kv_width, tensor_options));
  wv = register_module("wv", Linear(opts.dim, kv_width, tensor_options));
  wo = register_module("wo", Linear(q_width, opts.dim, tensor_options));
  if (opts.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(opts.head_dim, opts.norm_eps, tensor_options));
    k_norm = register_module("k_norm", RMSNorm(opts.head_dim, opts.norm_eps, tensor_options));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x_in, const torch::Tensor& cos,
                                     const torch::Tensor& sin) {
  const auto x = hooks.on_input(x_in);  // x: [B, S, dim]
  const int64_t B = x.size(0), S = x.size(1);
  const int64_t H = options.n_heads, Hkv = options.n_kv_heads, Dh = options.head_dim;
  auto q = wq(x).view({B, S, H, Dh});    // q: [B, S, H, Dh]
  auto k = wk(x).view({B, S, Hkv, Dh});  // k: [B, S, Hkv, Dh]
  auto v = wv(x).view({B, S, Hkv, Dh});  // v: [B, S, Hkv, Dh]
  if (options.qk_norm) {
    q = q_norm(q);  // q: [B, S, H, Dh]
    k = k_norm(k);  // k: [B, S, Hkv, Dh]
  }
  const auto eager_rope = [](const std::vector<torch::Tensor>& in) {
    return apply_rope(in[0], in[1], in[2]);
  };
  q = rotary({q, cos, sin}, eager_rope).transpose(1, 2);  // q: [B, H, S, Dh]
  k = rotary({k, cos, sin}, eager_rope).transpose(1, 2);  // k: [B, Hkv, S, Dh]
  v = v.transpose(1, 2);                        // v: [B, Hkv, S, Dh]
  auto o = attend(q, k, v, 1.0 / std::sqrt(double(Dh)));  // o: [B, H, S, Dh]
  return hooks.on_output(wo(o.transpose(1, 2).reshape({B, S, H * Dh})));  // [B, S, dim]
}

std::vector<ShardedSize> AttentionImpl::tensor_parallel_sizes() const {
  return {{"query heads", options.n_heads}, {"key/value heads", options.n_kv_heads}};
}

int64_t AttentionImpl::key_value_elements() const {
  return 2 * options.n_kv_heads * options.head_dim;
}

SavedElements AttentionImpl::saved_elements(bool op_level) const {
  const int64_t q = options.n_heads * options.head_dim;
  const int64_t kv = options.n_kv_heads * options.head_dim;
  const int64_t qk_norm_inputs = options.qk_norm && !op_level ? q + kv : 0;
  return {0, (q + 2 * kv) + qk_norm_inputs + q + options.n_heads};
}

int64_t AttentionImpl::flops_per_token(int64_t seq_len) const {
  return 6 * num_params() + 12 * options.n_heads * options.head_dim * seq_len;
}

std::vector<ElementwiseOp*> AttentionImpl::recomputed_ops() {
  if (!options.qk_norm) return {};
  return {&q_norm->compute, &k_norm->compute};
}

}  // namespace titan::models
