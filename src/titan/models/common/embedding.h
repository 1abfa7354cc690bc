// A token embedding table whose weight is allocated uninitialised on any device (torch::kMeta
// included); see linear.h for why torch::nn::Embedding does not fit.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/weight_module.h"

namespace titan::models {

class EmbeddingImpl : public WeightModule {
 public:
  /// weight: [num_embeddings, dim], dtype/device from `options`, uninitialised.
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, const torch::TensorOptions& options) {
    weight = register_parameter("weight", torch::empty({num_embeddings, dim}, options));
  }

  /// ids: [...] int64 in [0, num_embeddings) -> [..., dim].
  torch::Tensor forward(const torch::Tensor& ids) { return torch::embedding(weight, ids); }

};
TORCH_MODULE(Embedding);

}  // namespace titan::models
