// SwiGLU feed-forward network (Shazeer 2020, "GLU Variants Improve Transformer",
// arXiv:2002.05202) as in Llama: out = w2(silu(w1 x) * w3 x), no biases.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "titan/models/common/block_part.h"
#include "titan/models/common/elementwise_op.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/module_hooks.h"

namespace titan::models {

/// TorchTitan's hidden width rule (Llama's FeedForward): h = int(2 * 4 * dim / 3); if
/// ffn_dim_multiplier is set, h = int(ffn_dim_multiplier * h); then h is rounded up to a multiple
/// of `multiple_of`. Llama 3 8B: dim 4096, multiplier 1.3, multiple_of 1024 -> 14336.
/// Throws ConfigError if dim or multiple_of is not positive.
int64_t ffn_hidden_dim(int64_t dim, int64_t multiple_of, std::optional<double> ffn_dim_multiplier);

class FeedForwardImpl : public FeedForwardPart {
 public:
  /// w1, w3: [hidden_dim, dim]; w2: [dim, hidden_dim]; uninitialised (see init_weights).
  FeedForwardImpl(int64_t dim, int64_t hidden_dim, const torch::TensorOptions& options);

  /// x: [B, S, dim] -> [B, S, dim]; `hooks` run on x and on the output of w2, `gate` computes
  /// silu(w1 x) * w3 x from the two projections.
  torch::Tensor forward(const torch::Tensor& x) override;

  /// The hidden width (w1, w3 column-parallel; w2 row-parallel).
  std::vector<ShardedSize> tensor_parallel_sizes() const override;
  /// The w1 and w3 outputs, silu(w1 x) and the w2 input: 4 x hidden between the column- and
  /// row-parallel projections (a GeLU MLP's 4h + 4h in Korthikanti et al.); op-level
  /// checkpointing recomputes the gate and keeps the two projections.
  SavedElements saved_elements(bool op_level) const override;
  /// 6 x parameters.
  int64_t flops_per_token(int64_t seq_len) const override;
  /// The SwiGLU gate.
  std::vector<ElementwiseOp*> recomputed_ops() override { return {&gate}; }

  int64_t hidden_dim;  // the whole model's (tensor parallelism slices w1, w2, w3)
  Linear w1{nullptr};  // gate projection (HF mlp.gate_proj)
  Linear w2{nullptr};  // down projection (HF mlp.down_proj)
  Linear w3{nullptr};  // up projection (HF mlp.up_proj)
  ModuleHooks hooks;
  ElementwiseOp gate;
};
TORCH_MODULE(FeedForward);

}  // namespace titan::models
