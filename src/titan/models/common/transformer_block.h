// One pre-norm decoder block: h = x + attention(attention_norm(x)), then
// out = h + feed_forward(ffn_norm(h)). The attention and the feed-forward network are
// replaceable parts (block_part.h): grouped-query attention with SwiGLU or a mixture of experts
// (transformer_block), other parts for other families. Submodule names follow TorchTitan's
// TransformerBlock.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "titan/models/common/block_part.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/transformer_args.h"

namespace titan::models {

class TransformerBlockImpl : public torch::nn::Module {
 public:
  /// Block `layer_id` (0-based) of width `dim` around the given parts; its norms are RMSNorms
  /// with `norm_eps` set to ones on `options`' device.
  TransformerBlockImpl(int64_t layer_id, int64_t dim, double norm_eps,
                       std::shared_ptr<AttentionPart> attention,
                       std::shared_ptr<FeedForwardPart> feed_forward,
                       const torch::TensorOptions& options);

  /// x: [B, S, dim]; cos, sin: [S, rope_dim] -> [B, S, dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

  /// The parts, attention first.
  std::vector<const BlockPart*> parts() const { return {attention.get(), feed_forward.get()}; }
  /// Elements saved per token for backward: the parts' plus the norms' inputs and outputs in
  /// the sequence region (4 x dim; 3 x dim under op-level checkpointing, which recomputes the
  /// norms from their inputs).
  SavedElements saved_elements(bool op_level) const;
  /// Training FLOPs per token at `seq_len`: the parts' and 6 x the norms' parameters.
  int64_t flops_per_token(int64_t seq_len) const;
  /// What op-level selective checkpointing recomputes: the two norms and the parts' ops.
  std::vector<ElementwiseOp*> recomputed_ops();

  int64_t layer_id;
  int64_t dim;
  std::shared_ptr<AttentionPart> attention;
  std::shared_ptr<FeedForwardPart> feed_forward;
  RMSNorm attention_norm{nullptr};
  RMSNorm ffn_norm{nullptr};
  /// (x, delta, ffn_norm) -> {h = x + delta, ffn_norm(h)} as one op: compile mode installs
  /// the fused kernel (kernels/rms_norm.h); empty: the add, then ffn_norm.
  using ResidualNorm = std::function<std::pair<torch::Tensor, torch::Tensor>(
      const torch::Tensor& x, const torch::Tensor& delta, const RMSNormImpl& norm)>;
  ResidualNorm residual_norm;
};
TORCH_MODULE(TransformerBlock);

/// Block `layer_id` (0-based) of a model shaped by `args`: grouped-query attention (with q/k
/// norms when args.qk_norm) or MLA (args.mla), and SwiGLU or a mixture of experts when
/// args.is_moe_layer;
/// parameters uninitialised on `options`' device, with TorchTitan's init rules: norms to ones;
/// wq, wk, wv, w1 (the experts' and the shared experts' too; MLA's wq, wq_a, wq_b, wkv_a,
/// wkv_b) ~ trunc_normal(0, 0.02, [-2, 2]);
/// wo, w2, w3 and the router gate ~ trunc_normal(0, std, [-2, 2]) with std = 0.02 /
/// sqrt(2 * (layer_id + 1)) when args.depth_init, else 0.02 / sqrt(2 * n_layers).
TransformerBlock transformer_block(int64_t layer_id, const TransformerArgs& args,
                                   const torch::TensorOptions& options);

}  // namespace titan::models
