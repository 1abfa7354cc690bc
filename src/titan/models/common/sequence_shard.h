// A sequence split across ranks (context parallelism, distributed/context_parallel.h): each
// rank holds some chunks of every sequence, so RoPE needs their positions and attention needs
// the other ranks' keys. Without one, a rank holds whole sequences.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace titan::models {

class SequenceShard {
 public:
  virtual ~SequenceShard() = default;
  /// The positions in the whole sequence of this rank's `local_len` tokens: [local_len] int64
  /// on the CPU.
  virtual torch::Tensor positions(int64_t local_len) const = 0;
  /// causal_attention's contract (causal_attention.h) for this rank's tokens: q [B, H, s, Dh],
  /// k [B, Hkv, s, Dh], v [B, Hkv, s, Dv] at positions(s) -> [B, H, s, Dv], each query attending
  /// to the keys at its position and before, on every rank. Collective over the ranks sharing
  /// the sequence.
  virtual torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, double scale) = 0;
};

}  // namespace titan::models
