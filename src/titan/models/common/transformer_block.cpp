#include "titan/models/common/transformer_block.h"

#include <cmath>

namespace titan::models {
namespace {

// TorchTitan's weight std and nn.init.trunc_normal_'s default (absolute) bounds.
constexpr double kInitStd = 0.02;
constexpr double kTruncLow = -2.0;
constexpr double kTruncHigh = 2.0;

}  // namespace

TransformerBlockImpl::TransformerBlockImpl(int64_t layer_id, const TransformerArgs& args,
                                           const torch::TensorOptions& options)
    : layer_id(layer_id) {
  AttentionOptions attn;
  attn.dim = args.dim;
  attn.n_heads = args.n_heads;
  attn.n_kv_heads = args.kv_heads();
  attn.head_dim = args.head_size();
  attn.qk_norm = args.qk_norm;
  attn.norm_eps = args.norm_eps;
  attn.chunk_size = args.attention_chunk_size;
  attention = register_module("attention", Attention(attn, options));
  feed_forward = register_module("feed_forward", FeedForward(args.dim, args.ffn_hidden(), options));
  attention_norm = register_module("attention_norm", RMSNorm(args.dim, args.norm_eps, options));
  ffn_norm = register_module("ffn_norm", RMSNorm(args.dim, args.norm_eps, options));

  const double depth = args.depth_init ? double(layer_id + 1) : double(args.n_layers);
  const auto in_rule = InitRule::trunc_normal(0.0, kInitStd, kTruncLow, kTruncHigh);
  const auto out_rule =
      InitRule::trunc_normal(0.0, kInitStd / std::sqrt(2.0 * depth), kTruncLow, kTruncHigh);
  for (auto* m : {attention->wq.get(), attention->wk.get(), attention->wv.get(),
                  feed_forward->w1.get()}) {
    m->init = in_rule;
  }
  for (auto* m : {attention->wo.get(), feed_forward->w2.get(), feed_forward->w3.get()}) {
    m->init = out_rule;
  }
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin) {
  auto h = x + attention->forward(attention_norm(x), cos, sin);  // h: [B, S, dim]
  return h + feed_forward(ffn_norm(h));                          // [B, S, dim]
}

}  // namespace titan::models
