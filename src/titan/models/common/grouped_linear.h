// A grouped linear layer, the grouped GEMM of mixture-of-experts layers: rows of x sorted by
// group, group e multiplied by its own weight, with no padding to a capacity. Forward and
// backward side by side; each group's weight gradient is written into one [E, out, in] tensor
// (autograd through per-group slices of the weight would allocate a full-size zero gradient per
// group).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace titan::models {

/// x: [N, in]; w: [E, out, in]; counts: E row counts (sum N), rows of group e follow those of
/// group e - 1 -> [N, out]: rows of group e are x_e w[e]^T. Differentiable in x and w; a
/// group without rows gets a zero weight gradient.
torch::Tensor grouped_linear(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts);

}  // namespace titan::models
