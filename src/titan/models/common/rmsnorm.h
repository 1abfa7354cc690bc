// Root-mean-square layer normalisation (Zhang & Sennrich 2019, "Root Mean Square Layer
// Normalization"), as Llama and Qwen use it: y = x / sqrt(mean(x^2) + eps) * weight.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/elementwise_op.h"
#include "titan/models/common/weight_module.h"

namespace titan::models {

class RMSNormImpl : public WeightModule {
 public:
  /// weight: [dim], dtype/device from `options`, set to ones (its init rule too).
  RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options);

  /// x: [..., dim] -> [..., dim] in x's dtype. The statistics and the scaling are computed in
  /// float32 (float64 when x is float64), as Hugging Face's LlamaRMSNorm does; through
  /// `compute` (one elementwise op of x and the weight).
  torch::Tensor forward(const torch::Tensor& x);

  double eps;
  ElementwiseOp compute;
};
TORCH_MODULE(RMSNorm);

}  // namespace titan::models
