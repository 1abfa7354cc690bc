// One pre-norm decoder block (Llama / Qwen3): h = x + attention(attention_norm(x)), then
// out = h + feed_forward(ffn_norm(h)). Submodule names follow TorchTitan's TransformerBlock.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/transformer_args.h"

namespace titan::models {

class TransformerBlockImpl : public torch::nn::Module {
 public:
  /// Block `layer_id` (0-based) of a model shaped by `args`, parameters uninitialised on
  /// `options`' device, with TorchTitan's init rules: norms to ones; wq, wk, wv, w1 ~
  /// trunc_normal(0, 0.02, [-2, 2]); wo, w2, w3 ~ trunc_normal(0, std, [-2, 2]) with
  /// std = 0.02 / sqrt(2 * (layer_id + 1)) when args.depth_init, else 0.02 / sqrt(2 * n_layers).
  TransformerBlockImpl(int64_t layer_id, const TransformerArgs& args,
                       const torch::TensorOptions& options);

  /// x: [B, S, dim]; cos, sin: [S, head_dim] -> [B, S, dim].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

  int64_t layer_id;
  Attention attention{nullptr};
  FeedForward feed_forward{nullptr};
  RMSNorm attention_norm{nullptr};
  RMSNorm ffn_norm{nullptr};
};
TORCH_MODULE(TransformerBlock);

}  // namespace titan::models
