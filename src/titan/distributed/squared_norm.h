// The squared L2 norm of a gradient for clipping, summed in float64 without a float64 copy of
// the tensor (x.to(kDouble).pow(2).sum() holds two: 2.5 GB for Qwen3 0.6B's tied embedding
// gradient).
#pragma once

#include <torch/torch.h>

namespace titan::distributed {

/// x: any shape, float32, float64 or bfloat16 -> 0-dim float64 on x's device: sum(x^2), each
/// square and the sum in float64 (on the CPU one pass over x, no copy; elsewhere through
/// LibTorch's norm, which makes one float64 copy).
torch::Tensor squared_norm(const torch::Tensor& x);

}  // namespace titan::distributed
