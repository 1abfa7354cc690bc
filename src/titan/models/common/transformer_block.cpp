#include "titan/models/common/transformer_block.h"

#include <cmath>
#include <tuple>

#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/mla.h"
#include "titan/models/common/moe.h"

namespace titan::models {
namespace {

// TorchTitan's weight std and nn.init.trunc_normal_'s default (absolute) bounds.
constexpr double kInitStd = 0.02;
constexpr double kTruncLow = -2.0;
constexpr double kTruncHigh = 2.0;

}  // namespace

TransformerBlockImpl::TransformerBlockImpl(int64_t layer_id, int64_t dim, double norm_eps,
                                           std::shared_ptr<AttentionPart> attention_part,
                                           std::shared_ptr<FeedForwardPart> feed_forward_part,
                                           const torch::TensorOptions& options)
    : layer_id(layer_id),
      dim(dim),
      attention(register_module("attention", std::move(attention_part))),
      feed_forward(register_module(feed_forward_part->slot_name(), feed_forward_part)),
      attention_norm(register_module("attention_norm", RMSNorm(dim, norm_eps, options))),
      ffn_norm(register_module("ffn_norm", RMSNorm(dim, norm_eps, options))) {}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos,
                                            const torch::Tensor& sin) {
  auto delta = attention->forward(attention_norm(x), cos, sin);  // delta: [B, S, dim]
  torch::Tensor h, normed;                                        // h, normed: [B, S, dim]
  if (residual_norm) {
    std::tie(h, normed) = residual_norm(x, delta, *ffn_norm);
  } else {
    h = x + delta;
    normed = ffn_norm(h);
  }
  return h + feed_forward->forward(normed);  // [B, S, dim]
}

SavedElements TransformerBlockImpl::saved_elements(bool op_level) const {
  SavedElements norms{(op_level ? 3 : 4) * dim, 0};
  return norms + attention->saved_elements(op_level) + feed_forward->saved_elements(op_level);
}

int64_t TransformerBlockImpl::flops_per_token(int64_t seq_len) const {
  const int64_t norm_params = attention_norm->weight.numel() + ffn_norm->weight.numel();
  return 6 * norm_params + attention->flops_per_token(seq_len) +
         feed_forward->flops_per_token(seq_len);
}

std::vector<ElementwiseOp*> TransformerBlockImpl::recomputed_ops() {
  std::vector<ElementwiseOp*> ops = {&attention_norm->compute, &ffn_norm->compute};
  const std::vector<BlockPart*> parts = {attention.get(), feed_forward.get()};
  for (auto* part : parts) {
    const auto part_ops = part->recomputed_ops();
    ops.insert(ops.end(), part_ops.begin(), part_ops.end());
  }
  return ops;
}

TransformerBlock transformer_block(int64_t layer_id, const TransformerArgs& args,
                                   const torch::TensorOptions& options) {
  const double depth = args.depth_init ? double(layer_id + 1) : double(args.n_layers);
  const auto in_rule = InitRule::trunc_normal(0.0, kInitStd, kTruncLow, kTruncHigh);
  const auto out_rule =
      InitRule::trunc_normal(0.0, kInitStd / std::sqrt(2.0 * depth), kTruncLow, kTruncHigh);
  std::shared_ptr<AttentionPart> attention;
  if (args.mla) {
    auto mla = std::make_shared<MultiHeadLatentAttentionImpl>(
        args.dim, args.n_heads, *args.mla, args.mla->softmax_scale(args.yarn), options);
    for (auto* m : {&mla->wq, &mla->wq_a, &mla->wq_b, &mla->wkv_a, &mla->wkv_b}) {
      if (!m->is_empty()) (*m)->init = in_rule;
    }
    mla->wo->init = out_rule;
    attention = mla;
  } else {
    AttentionOptions attn;
    attn.dim = args.dim;
    attn.n_heads = args.n_heads;
    attn.n_kv_heads = args.kv_heads();
    attn.head_dim = args.head_size();
    attn.qk_norm = args.qk_norm;
    attn.norm_eps = args.norm_eps;
    auto gqa = std::make_shared<AttentionImpl>(attn, options);
    gqa->wq->init = gqa->wk->init = gqa->wv->init = in_rule;
    gqa->wo->init = out_rule;
    attention = gqa;
  }
  auto swiglu_init = [&](FeedForwardImpl& ffn) {
    ffn.w1->init = in_rule;
    ffn.w2->init = ffn.w3->init = out_rule;
  };
  std::shared_ptr<FeedForwardPart> feed_forward;
  if (args.is_moe_layer(layer_id)) {
    auto moe = std::make_shared<MoEImpl>(args.dim, *args.moe, options);
    moe->experts->w1->init = in_rule;
    moe->experts->w2->init = moe->experts->w3->init = moe->router->gate->init = out_rule;
    if (moe->shared_experts) swiglu_init(*moe->shared_experts);
    feed_forward = moe;
  } else if (args.feed_forward) {
    feed_forward = args.feed_forward(args, in_rule, out_rule, options);
  } else {
    auto ffn = std::make_shared<FeedForwardImpl>(args.dim, args.ffn_hidden(), options);
    swiglu_init(*ffn);
    feed_forward = ffn;
  }
  return TransformerBlock(layer_id, args.dim, args.norm_eps, std::move(attention),
                          std::move(feed_forward), options);
}

}  // namespace titan::models
