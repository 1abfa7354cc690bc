// Compile mode's rotary position embedding (models/common/rope.h computes the same eagerly):
// one autograd node that reads q or k once and writes the rotated tensor once, where the eager
// composition makes four temporaries (the negated half, the rotated copy, two products). It
// keeps nothing of its input for backward: the gradient is the upstream gradient rotated back
// by the same angles, read from the cached cos and sin.
#pragma once

#include <torch/torch.h>

namespace titan::models::kernels {

/// Which dimensions of a head rotate together.
enum class RopeLayout {
  kHalves,       // i with i + Dh/2 (Hugging Face's rotate_half; apply_rope)
  kInterleaved,  // 2i with 2i + 1 (Meta's and DeepSeek's; apply_rope_interleaved)
};

/// x: [B, S, H, Dh] (float32, float64 or bfloat16, any strides), cos, sin: [S, Dh]
/// (rope_cos_sin; float32 or float64) -> [B, S, H, Dh] contiguous in x's dtype, rotated in
/// cos's dtype (the eager functions' precision). Kernel Halves: y = x cos + rotate_half(x) sin;
/// kInterleaved: (y[2i], y[2i+1]) = (x[2i] c_i - x[2i+1] s_i, x[2i+1] c_i + x[2i] s_i) with
/// c_i, s_i the first Dh/2 columns. Differentiable in x. CPU tensors only (c10::Error
/// otherwise).
torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                   RopeLayout layout);

}  // namespace titan::models::kernels
