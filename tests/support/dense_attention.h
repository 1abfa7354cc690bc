// Test reference: causal grouped-query attention in its textbook form, the whole [B, H, S, S]
// score matrix under autograd (keys and values repeated per query group, masked softmax).
#pragma once

#include <torch/torch.h>

#include <limits>

namespace titan::testing {

/// softmax(q k^T * scale + causal mask) v: q [B, H, S, Dh], k [B, Hkv, S, Dh], v [B, Hkv, S, Dv]
/// -> [B, H, S, Dv]; query head h reads key/value head h / (H / Hkv).
inline torch::Tensor dense_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, double scale) {
  const int64_t G = q.size(1) / k.size(1), S = q.size(2);
  auto kr = k.repeat_interleave(G, 1);                            // kr: [B, H, S, Dh]
  auto vr = v.repeat_interleave(G, 1);                            // vr: [B, H, S, Dv]
  auto scores = torch::matmul(q, kr.transpose(-1, -2)) * scale;  // [B, H, S, S]
  auto mask = torch::ones({S, S}, torch::kBool).triu(1);          // mask: [S, S]
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), vr);  // [B, H, S, Dv]
}

}  // namespace titan::testing
