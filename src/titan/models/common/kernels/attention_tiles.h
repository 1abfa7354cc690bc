// The loops of compile mode's attention kernel (kernels/attention.h) over one head, in float32:
// FlashAttention-2's tiling (Dao 2023, arXiv:2307.08691) on the CPU, 64 queries by 64 keys a
// tile, the scores of one tile in a per-thread buffer and never more. Each tile's products are
// register-blocked vector loops sized to the instruction set's registers (AVX-512: 8 rows x 32
// columns; AVX2: 6 x 16; SSE: 6 x 8) and its exponentials a vectorised Cephes polynomial.
// Compiled once per variant (x86-64-v4, x86-64-v3, baseline x86-64); kernel_isa() (cpu_isa.h)
// picks the one that runs.
#pragma once

#include <cstdint>

namespace titan::models::kernels {

/// One (batch, head)'s rows: row i of q is q + i * q_row (Dh floats, contiguous), of k and v
/// (the head's key/value head) k + i * k_row, v + i * v_row (Dv floats).
struct AttentionHead {
  const float* q;
  int64_t q_row;
  const float* k;
  int64_t k_row;
  const float* v;
  int64_t v_row;
  int64_t dh, dv;
  float scale;
};

/// Query rows [begin, end) over keys 0..i each: out row i (out + i * out_row) = softmax(q_i K^T
/// scale) V, lse[i] = log-sum-exp of the row's scaled scores.
void attention_forward_rows(const AttentionHead& head, int64_t begin, int64_t end, float* out,
                            int64_t out_row, float* lse);

/// One head's gradients over `seq` rows, given the upstream gradient dout (rows of Dv),
/// lse [seq] from the forward and delta [seq] = rowsum(dout * out). dq rows (Dh) and the key/
/// value head's dk (Dh) and dv (Dv) rows are added to, so heads sharing a key/value head must
/// run one after another.
struct AttentionHeadGrads {
  const float* dout;
  int64_t dout_row;
  const float* lse;
  const float* delta;
  float* dq;
  int64_t dq_row;
  float* dk;
  int64_t dk_row;
  float* dv;
  int64_t dv_row;
};
void attention_backward_head(const AttentionHead& head, int64_t seq,
                             const AttentionHeadGrads& grads);

}  // namespace titan::models::kernels
