// Test helper: how far a result is from its reference, relative to the reference's largest
// magnitude (so near-zero elements do not dominate), in float64 whatever the dtypes.
#pragma once

#include <torch/torch.h>

namespace titan::testing {

/// max |a - b| / max |b|.
inline double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  auto ad = a.to(torch::kFloat64), bd = b.to(torch::kFloat64);
  return ((ad - bd).abs().max() / bd.abs().max()).item<double>();
}

}  // namespace titan::testing
