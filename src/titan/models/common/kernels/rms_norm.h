// Compile mode's RMSNorm (models/common/rmsnorm.h computes the same eagerly): one autograd
// node whose forward reads each row once for its sum of squares and once to scale it, keeping
// only the input and the per-row rstd = 1 / sqrt(mean(x^2) + eps) for backward, which reads
// the row again once for the dot product and once to write the gradient.
#pragma once

#include <torch/torch.h>

namespace titan::models::kernels {

/// x: [..., D] (float32, float64 or bfloat16), weight: [D] (any float dtype) -> y: [..., D] in
/// x's dtype, y = x * rstd * weight with the statistics and the scaling in float32 (float64
/// for float64 x). Gradients of x and weight (weight's in its own dtype). CPU tensors only
/// (c10::Error otherwise).
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace titan::models::kernels
