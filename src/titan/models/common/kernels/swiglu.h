// Compile mode's SwiGLU gate (Shazeer 2020; models/common/feed_forward.h computes it eagerly):
// silu(gate) * up as one autograd node that keeps only its two inputs (the projections'
// outputs) and recomputes the sigmoid in backward, where the eager composition also keeps
// silu(gate). In float32 one vectorised loop each way (kernels/swiglu_rows.h); in bfloat16 and
// float64 the sigmoid is ATen's vectorised kernel into a temporary and the products one loop
// each way.
#pragma once

#include <torch/torch.h>

namespace titan::models::kernels {

/// gate, up: [..., H] (same shape and dtype: float32, float64 or bfloat16) -> [..., H],
/// silu(gate) * up computed in float32 (float64 for float64) and rounded once. Gradients of
/// both inputs. CPU tensors only (c10::Error otherwise).
torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace titan::models::kernels
