#include "titan/models/common/mla.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"

namespace titan::models {

double MLAArgs::softmax_scale(const std::optional<YarnScaling>& yarn) const {
  double scale = 1.0 / std::sqrt(double(qk_head_dim()));
  if (yarn && yarn->factor > 1.0) {
    const double m = 0.1 * mscale * std::log(yarn->factor) + 1.0;
    scale *= m * m;
  }
  return scale;
}

void validate(const MLAArgs& a) {
  for (auto [field, value] : {std::pair<const char*, int64_t>{"kv_lora_rank", a.kv_lora_rank},
                              {"qk_nope_head_dim", a.qk_nope_head_dim},
                              {"qk_rope_head_dim", a.qk_rope_head_dim},
                              {"v_head_dim", a.v_head_dim}}) {
    if (value <= 0) {
      throw ConfigError(fmt::format("MLA argument {} must be positive, got {}", field, value));
    }
  }
  if (a.q_lora_rank < 0 || a.qk_rope_head_dim % 2 != 0) {
    throw ConfigError(fmt::format("MLA arguments: q_lora_rank must be >= 0 and qk_rope_head_dim "
                                  "even; got {} and {}",
                                  a.q_lora_rank, a.qk_rope_head_dim));
  }
}

MultiHeadLatentAttentionImpl::MultiHeadLatentAttentionImpl(int64_t dim, int64_t n_heads,
                                                           const MLAArgs& mla, double scale,
                                                           const torch::TensorOptions& options)
    : n_heads(n_heads), args(mla), softmax_scale(scale) {
  validate(args);
  const int64_t q_width = n_heads * args.qk_head_dim();
  if (args.q_lora_rank == 0) {
    wq = register_module("wq", Linear(dim, q_width, options));
  } else {
    wq_a = register_module("wq_a", Linear(dim, args.q_lora_rank, options));
    q_norm = register_module("q_norm", RMSNorm(args.q_lora_rank, args.latent_norm_eps, options));
    wq_b = register_module("wq_b", Linear(args.q_lora_rank, q_width, options));
  }
  wkv_a = register_module("wkv_a", Linear(dim, args.kv_lora_rank + args.qk_rope_head_dim, options));
  kv_norm = register_module("kv_norm", RMSNorm(args.kv_lora_rank, args.latent_norm_eps, options));
  wkv_b = register_module(
      "wkv_b",
      Linear(args.kv_lora_rank, n_heads * (args.qk_nope_head_dim + args.v_head_dim), options));
  wo = register_module("wo", Linear(n_heads * args.v_head_dim, dim, options));
}

torch::Tensor MultiHeadLatentAttentionImpl::forward(const torch::Tensor& x_in,
                                                    const torch::Tensor& cos,
                                                    const torch::Tensor& sin) {
  const auto x = hooks.on_input(x_in);  // x: [B, S, dim]
  const int64_t B = x.size(0), S = x.size(1), H = n_heads;
  const int64_t nope = args.qk_nope_head_dim, rope = args.qk_rope_head_dim;
  const int64_t vdim = args.v_head_dim;
  auto q = (wq ? wq(x) : wq_b(q_norm(wq_a(x)))).view({B, S, H, nope + rope});  // [B, S, H, qk]
  const auto eager_rope = [](const std::vector<torch::Tensor>& in) {
    return apply_rope_interleaved(in[0], in[1], in[2]);
  };
  auto q_rope = rotary({q.narrow(-1, nope, rope), cos, sin}, eager_rope);  // [B, S, H, r]
  auto latent = wkv_a(x);                                 // latent: [B, S, kv_lora + r]
  auto k_rope = rotary({latent.narrow(-1, args.kv_lora_rank, rope).unsqueeze(2), cos, sin},
                       eager_rope);                       // k_rope: [B, S, 1, r]
  auto kv = wkv_b(kv_norm(latent.narrow(-1, 0, args.kv_lora_rank)))
                .view({B, S, H, nope + vdim});          // kv: [B, S, H, nope + v]
  auto k = torch::cat({kv.narrow(-1, 0, nope), k_rope.expand({B, S, H, rope})}, -1);  // [B,S,H,qk]
  q = torch::cat({q.narrow(-1, 0, nope), q_rope}, -1).transpose(1, 2);  // q: [B, H, S, qk]
  auto v = kv.narrow(-1, nope, vdim).transpose(1, 2);                   // v: [B, H, S, v]
  auto o = attend(q, k.transpose(1, 2), v, softmax_scale);   // o: [B, H, S, v]
  return hooks.on_output(wo(o.transpose(1, 2).reshape({B, S, H * vdim})));  // [B, S, dim]
}

std::vector<ShardedSize> MultiHeadLatentAttentionImpl::tensor_parallel_sizes() const {
  return {{"attention heads", n_heads}};
}

int64_t MultiHeadLatentAttentionImpl::key_value_elements() const {
  return n_heads * (args.qk_head_dim() + args.v_head_dim);
}

SavedElements MultiHeadLatentAttentionImpl::saved_elements(bool op_level) const {
  const int64_t latents = args.kv_lora_rank + args.q_lora_rank;
  const int64_t per_head = 2 * args.qk_head_dim() + 2 * args.v_head_dim + 1;
  return {(op_level ? 1 : 2) * latents + args.qk_rope_head_dim, n_heads * per_head};
}

int64_t MultiHeadLatentAttentionImpl::flops_per_token(int64_t seq_len) const {
  return 6 * num_params() + 6 * n_heads * (args.qk_head_dim() + args.v_head_dim) * seq_len;
}

std::vector<ElementwiseOp*> MultiHeadLatentAttentionImpl::recomputed_ops() {
  std::vector<ElementwiseOp*> ops = {&kv_norm->compute};
  if (q_norm) ops.push_back(&q_norm->compute);
  return ops;
}

}  // namespace titan::models
