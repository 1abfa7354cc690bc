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
    : layer_id(layer_id), n_layers(args.n_layers), depth_init(args.depth_init) {
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
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin) {
  auto h = x + attention->forward(attention_norm(x), cos, sin);  // h: [B, S, dim]
  return h + feed_forward(ffn_norm(h));                          // [B, S, dim]
}

void TransformerBlockImpl::init_weights(at::Generator& gen) {
  const double depth = depth_init ? double(layer_id + 1) : double(n_layers);
  const double out_std = kInitStd / std::sqrt(2.0 * depth);
  attention_norm->reset_parameters();
  ffn_norm->reset_parameters();
  if (attention->options.qk_norm) {
    attention->q_norm->reset_parameters();
    attention->k_norm->reset_parameters();
  }
  for (auto* w : {&attention->wq->weight, &attention->wk->weight, &attention->wv->weight}) {
    init_trunc_normal_(*w, 0.0, kInitStd, kTruncLow, kTruncHigh, gen);
  }
  init_trunc_normal_(attention->wo->weight, 0.0, out_std, kTruncLow, kTruncHigh, gen);
  init_trunc_normal_(feed_forward->w1->weight, 0.0, kInitStd, kTruncLow, kTruncHigh, gen);
  init_trunc_normal_(feed_forward->w2->weight, 0.0, out_std, kTruncLow, kTruncHigh, gen);
  init_trunc_normal_(feed_forward->w3->weight, 0.0, out_std, kTruncLow, kTruncHigh, gen);
}

}  // namespace titan::models
