// Causal scaled-dot-product attention with grouped-query heads, computed tile by tile so that
// no [B, H, S, S] score tensor ever exists: a tile is a chunk of C queries (of a block of heads)
// against only the keys up to its last position, and the backward pass recomputes the tile's
// probabilities from the saved log-sum-exp instead of storing them (the memory scheme of
// FlashAttention, Dao et al. 2022, arXiv:2205.14135, with ordinary batched matmuls).
// Saved for backward: q, k, v, the output and one log-sum-exp per query. Working memory: a few
// tiles of at most max(2^20, G * C * S) scores (heads are blocked so a tile stays in cache).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace titan::models {

/// softmax(q k^T * scale + causal mask) v.
///   q: [B, H, S, Dh]; k, v: [B, Hkv, S, Dh], H a multiple of Hkv; query head h reads key/value
///   head h / (H / Hkv) (Hugging Face repeat_kv order). Query i attends to keys 0..i.
///   scale: usually Dh^-0.5. chunk_size: queries per chunk (> 0); the result does not depend
///   on it beyond rounding.
/// Returns [B, H, S, Dh] in q's dtype. Scores, softmax and both products run in float32 (in
/// float64 when q is float64). Differentiable once in q, k and v (no double backward).
/// Throws c10::Error (TORCH_CHECK) on inconsistent shapes.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale, int64_t chunk_size);

}  // namespace titan::models
