// Compile mode's causal attention: one autograd node over FlashAttention-2-style tiles
// (kernels/attention_tiles.h) in place of LibTorch's CPU flash kernel (causal_attention.h).
// Forward keeps q, k, v, the output and one log-sum-exp per query, as the eager kernel does;
// backward recomputes each tile's probabilities. No [S, S] scores exist, only a 64 x 64 tile per
// thread.
#pragma once

#include <torch/torch.h>

namespace titan::models::kernels {

/// causal_attention's contract (models/common/causal_attention.h): q [B, H, S, Dh],
/// k [B, Hkv, S, Dh], v [B, Hkv, S, Dv], H a multiple of Hkv -> [B, H, S, Dv], query i attending
/// to keys 0..i, query head h reading key/value head h / (H / Hkv). Computed in float32:
/// float32 inputs directly, bfloat16 ones through float32 copies (the result rounded once).
/// CPU tensors; c10::Error on other devices, dtypes or inconsistent shapes.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale);

}  // namespace titan::models::kernels
