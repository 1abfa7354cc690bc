// Causal scaled-dot-product attention with grouped-query heads, on LibTorch's
// scaled_dot_product_attention: PyTorch's fused kernels (FlashAttention-style on the CPU, Dao et
// al. 2022, arXiv:2205.14135; flash, cuDNN or memory-efficient kernels on CUDA), as TorchTitan's
// default attention. No [B, H, S, S] score tensor is kept: backward recomputes the probabilities
// from the saved log-sum-exp. Saved for backward: q, k, v, the output and one log-sum-exp per
// query. (an earlier titan chunked kernel was 1.5x slower at seq 2048 on the 2-core
// CPU; bench/NOTES.md.)
#pragma once

#include <torch/torch.h>

namespace titan::models {

/// softmax(q k^T * scale + causal mask) v.
///   q: [B, H, S, Dh]; k: [B, Hkv, S, Dh]; v: [B, Hkv, S, Dv] (MLA's value width may differ),
///   H a multiple of Hkv; query head h reads key/value
///   head h / (H / Hkv) (Hugging Face repeat_kv order). Query i attends to keys 0..i.
///   scale: usually Dh^-0.5.
/// Returns [B, H, S, Dv] in q's dtype (float32 accumulation for bfloat16 inputs). Differentiable
/// in q, k and v. Throws c10::Error (TORCH_CHECK) on inconsistent shapes.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale);

}  // namespace titan::models
