// Causal attention over a sequence cut into equal chunks, computed pair by pair (query chunk,
// key chunk) with online softmax (Milakov & Gimelshein 2018, arXiv:1805.02867): each pair gives
// an output and a log-sum-exp per query from PyTorch's fused CPU kernel, and the pairs of a
// query chunk merge through their log-sum-exps. Backward runs the fused kernel's backward per
// pair from the merged output and log-sum-exp, which makes each pair's gradients exact (Dao et
// al. 2022, arXiv:2205.14135). No pair ever holds more than one chunk's [Lq, Lk] scores.
// Context parallelism (distributed/context_parallel.h) runs it on each rank's chunks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace titan::models {

/// A query chunk's attention over some of its keys (normalised over those keys), or, from
/// finish_chunks, over all of them.
struct PartialAttention {
  torch::Tensor out;  // [B, H, Lq, Dv]: float32 (float64 for float64 inputs) while
                      // accumulating, the inputs' dtype once finished
  torch::Tensor lse;  // [B, H, Lq] float32 / float64: log-sum-exp of the scaled scores
};

/// Which chunks of the whole sequence a query tensor and a key tensor hold, all chunk_len long.
struct ChunkLayout {
  std::vector<int64_t> query_chunks;  // q's i-th chunk is the sequence's chunk query_chunks[i]
  std::vector<int64_t> key_chunks;    // the same for k and v
  int64_t chunk_len = 0;
};

/// The pairs of q's chunks with the key chunks in k and v, added to acc (one per query chunk,
/// empty at first): query chunk c takes key chunks g < c entirely, g == c causally and g > c
/// not at all. q [B, H, nq L, Dh]; k [B, Hkv, nk L, Dh]; v [B, Hkv, nk L, Dv] with Dv <= Dh
/// (MLA's narrower values are padded for the fused kernel) and H a multiple of Hkv (query head h
/// reads key/value head h / (H / Hkv)).
void attend_chunks(std::vector<PartialAttention>& acc, const torch::Tensor& q,
                   const torch::Tensor& k, const torch::Tensor& v, double scale,
                   const ChunkLayout& layout);

/// The chunks' normalised output [B, H, nq L, Dv] in `dtype` and log-sum-exp [B, H, nq L].
PartialAttention finish_chunks(const std::vector<PartialAttention>& acc, torch::ScalarType dtype);

/// attend_chunks's backward: given the upstream gradient dout [B, H, nq L, Dv] and the finished
/// output and log-sum-exp over all keys, adds the gradients of q, k and v to dq, dk, dv
/// (float32, float64 for float64 inputs). The same pairs as attend_chunks.
void attend_chunks_backward(torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv,
                            const torch::Tensor& dout, const torch::Tensor& q,
                            const torch::Tensor& k, const torch::Tensor& v,
                            const PartialAttention& finished, double scale,
                            const ChunkLayout& layout);

/// The dtype attend_chunks_backward accumulates gradients of `t`'s dtype in.
torch::ScalarType accumulate_dtype(const torch::Tensor& t);

/// Causal attention of q's chunks over k's and v's (attend_chunks over all keys, finished),
/// returned in q's dtype. Differentiable in q, k and v. Throws c10::Error (TORCH_CHECK) on
/// shapes that do not match the layout or a query chunk whose own keys are missing.
torch::Tensor chunked_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, double scale,
                                       const ChunkLayout& layout);

}  // namespace titan::models
