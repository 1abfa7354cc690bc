// A bias-free linear layer, y = x W^T, whose weight is allocated uninitialised on any device
// (torch::kMeta included, for shape-only models). torch::nn::Linear cannot do that: it always
// allocates on the CPU and fills its weight. Initialisation is the model's init_weights.
// Under a zero-bubble pipeline's recording (platform/deferred_weight_grad.h) its weight
// gradient waits for the weight pass.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/weight_module.h"

namespace titan::models {

/// x: [..., in], weight: [out, in] -> [..., out], as torch::linear; an input pass of a recorded
/// forward defers the weight's gradient (dW = dy^T x) to the weight pass.
torch::Tensor deferrable_linear(const torch::Tensor& x, const torch::Tensor& weight);

class LinearImpl : public WeightModule {
 public:
  /// weight: [out_features, in_features], dtype/device from `options`, uninitialised.
  LinearImpl(int64_t in_features, int64_t out_features, const torch::TensorOptions& options) {
    weight = register_parameter("weight",
                                  torch::empty({out_features, in_features}, options));
  }

  /// x: [..., in_features] -> [..., out_features] (same dtype as the weight).
  torch::Tensor forward(const torch::Tensor& x) { return deferrable_linear(x, weight); }
};
TORCH_MODULE(Linear);

}  // namespace titan::models
