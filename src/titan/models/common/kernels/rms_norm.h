// Compile mode's RMSNorm (models/common/rmsnorm.h computes the same eagerly): one autograd
// node whose forward reads each row once for its sum of squares and once to scale it, keeping
// only the input and the per-row rstd = 1 / sqrt(mean(x^2) + eps) for backward, which reads
// the row again once for the dot product and once to write the gradient.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace titan::models::kernels {

/// x: [..., D] (float32, float64 or bfloat16), weight: [D] (any float dtype) -> y: [..., D] in
/// x's dtype, y = x * rstd * weight with the statistics and the scaling in float32 (float64
/// for float64 x). Gradients of x and weight (weight's in its own dtype). CPU tensors only
/// (c10::Error otherwise).
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

/// The residual add and the norm after it in one pass each way: x, delta: [..., D] (same
/// dtype) -> {h = x + delta, y = rms_norm(h, weight, eps)}. Keeps h and rstd like rms_norm;
/// backward adds h's own gradient to the norm's in the same pass and gives it to x and delta.
std::pair<torch::Tensor, torch::Tensor> residual_rms_norm(const torch::Tensor& x,
                                                          const torch::Tensor& delta,
                                                          const torch::Tensor& weight, double eps);

}  // namespace titan::models::kernels
