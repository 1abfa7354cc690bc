#include "titan/models/common/kernels/attention_tiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "titan/models/common/kernels/cpu_isa.h"
#include "titan/models/common/kernels/simd.h"

namespace titan::models::kernels {
namespace {

using namespace simd;  // NOLINT: this file is one of its variants' sources

constexpr int64_t kTileRows = 64;  // queries per tile
constexpr int64_t kTileKeys = 64;  // keys per tile (the score buffers' row stride)

// One tile of C (=|+=) A B: MR rows x NV vectors of columns. A(i, p) = a[i * a_row + p * a_col]
// (any strides: A^T is A with them swapped), B [k, n] rows of ldb, C rows of ldc.
template <class S, int MR, int NV, bool kAdd>
TITAN_INLINE void gemm_tile(int64_t k, const float* a, int64_t a_row, int64_t a_col,
                            const float* b, int64_t ldb, float* c, int64_t ldc) {
  using Vec = typename S::Vec;
  Vec acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      acc[r][v] = kAdd ? load_vec<S>(c + r * ldc + v * S::kLanes) : Vec{};
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    Vec bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load_vec<S>(b + p * ldb + v * S::kLanes);
    for (int r = 0; r < MR; ++r) {
      const float x = a[r * a_row + p * a_col];
      for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) store_vec<S>(c + r * ldc + v * S::kLanes, acc[r][v]);
  }
}

// Columns [j, j + NV vectors) of C, all m rows: S::kRows at a time, then one at a time.
template <class S, int NV, bool kAdd>
TITAN_INLINE void gemm_columns(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                               const float* b, int64_t ldb, float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + S::kRows <= m; i += S::kRows) {
    gemm_tile<S, S::kRows, NV, kAdd>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc);
  }
  for (; i < m; ++i) {
    gemm_tile<S, 1, NV, kAdd>(k, a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc);
  }
}

// C [m, n] (=|+=) A [m, k] B [k, n], A(i, p) = a[i * a_row + p * a_col].
template <class S, bool kAdd>
TITAN_INLINE void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                       int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int64_t L = S::kLanes;
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) {
    gemm_columns<S, 2, kAdd>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc);
  }
  for (; j + L <= n; j += L) gemm_columns<S, 1, kAdd>(m, k, a, a_row, a_col, b + j, ldb, c + j, ldc);
  for (; j < n; ++j) {  // the last n % L columns
    for (int64_t i = 0; i < m; ++i) {
      float acc = kAdd ? c[i * ldc + j] : 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += a[i * a_row + p * a_col] * b[p * ldb + j];
      c[i * ldc + j] = acc;
    }
  }
}

// rows [n, width] of `rows` floats apart -> out [width, n] (a tile's keys or values, transposed
// so that one key's column of a product is contiguous).
TITAN_INLINE void transpose(const float* rows, int64_t row, int64_t n, int64_t width, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t d = 0; d < width; ++d) out[d * kTileKeys + j] = rows[j * row + d];
  }
}

// s[j] = exp(s[j] * scale - shift) for j < n; returns their sum.
template <class S>
TITAN_INLINE float exp_row(float* s, int64_t n, float scale, float shift) {
  using Vec = typename S::Vec;
  Vec sum{};
  int64_t j = 0;
  for (; j + S::kLanes <= n; j += S::kLanes) {
    const Vec e = exp_cephes<S>(load_vec<S>(s + j) * scale - shift);
    store_vec<S>(s + j, e);
    sum += e;
  }
  float total = 0;
  for (int64_t l = 0; l < S::kLanes; ++l) total += sum[l];
  for (; j < n; ++j) total += s[j] = exp_cephes<S>(s[j] * scale - shift);
  return total;
}

template <class S>
TITAN_INLINE float max_of(const float* s, int64_t n) {
  using Vec = typename S::Vec;
  Vec best = Vec{} - std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + S::kLanes <= n; j += S::kLanes) {
    const Vec x = load_vec<S>(s + j);
    best = x > best ? x : best;
  }
  float out = -std::numeric_limits<float>::infinity();
  for (int64_t l = 0; l < S::kLanes; ++l) out = std::max(out, best[l]);
  for (; j < n; ++j) out = std::max(out, s[j]);
  return out;
}

// Keys of tile j0 (n of them) query row i sees: 0..i.
TITAN_INLINE int64_t visible_keys(int64_t i, int64_t j0, int64_t n) {
  return std::clamp<int64_t>(i - j0 + 1, 0, n);
}

// One thread's buffers, sized for the largest head seen.
struct Scratch {
  std::vector<float> scores, probs, keys_t, values_t, out, max, sum;
  void size_for(int64_t dh, int64_t dv) {
    scores.resize(kTileRows * kTileKeys);
    probs.resize(kTileRows * kTileKeys);
    keys_t.resize(std::max<size_t>(keys_t.size(), dh * kTileKeys));
    values_t.resize(std::max<size_t>(values_t.size(), dv * kTileKeys));
    out.resize(std::max<size_t>(out.size(), kTileRows * dv));
    max.resize(kTileRows);
    sum.resize(kTileRows);
  }
};
thread_local Scratch scratch;

// Query rows [i0, i0 + m), m <= 64, over keys 0..i0 + m - 1, with online softmax.
template <class S>
TITAN_INLINE void forward_tile(const AttentionHead& h, int64_t i0, int64_t m, float* out,
                               int64_t out_row, float* lse) {
  Scratch& w = scratch;
  float *s = w.scores.data(), *o = w.out.data(), *mx = w.max.data(), *l = w.sum.data();
  std::fill_n(o, m * h.dv, 0.0f);
  std::fill_n(mx, m, -std::numeric_limits<float>::infinity());
  std::fill_n(l, m, 0.0f);
  for (int64_t j0 = 0; j0 < i0 + m; j0 += kTileKeys) {
    const int64_t n = std::min(kTileKeys, i0 + m - j0);
    transpose(h.k + j0 * h.k_row, h.k_row, n, h.dh, w.keys_t.data());  // [Dh, n]
    gemm<S, false>(m, n, h.dh, h.q + i0 * h.q_row, h.q_row, 1, w.keys_t.data(), kTileKeys, s,
                   kTileKeys);  // s: [m, n] = q k^T
    for (int64_t r = 0; r < m; ++r) {
      float* row = s + r * kTileKeys;
      const int64_t seen = visible_keys(i0 + r, j0, n);
      if (seen > 0) {
        const float top = std::max(mx[r], max_of<S>(row, seen) * h.scale);
        const float alpha = std::exp(mx[r] - top);  // 0 on the first tile
        l[r] = l[r] * alpha + exp_row<S>(row, seen, h.scale, top);
        mx[r] = top;
        for (int64_t d = 0; d < h.dv; ++d) o[r * h.dv + d] *= alpha;
      }
      std::fill(row + seen, row + n, 0.0f);
    }
    gemm<S, true>(m, h.dv, n, s, kTileKeys, 1, h.v + j0 * h.v_row, h.v_row, o, h.dv);  // o += p v
  }
  for (int64_t r = 0; r < m; ++r) {
    const float inv = 1.0f / l[r];
    for (int64_t d = 0; d < h.dv; ++d) out[(i0 + r) * out_row + d] = o[r * h.dv + d] * inv;
    lse[i0 + r] = mx[r] + std::log(l[r]);
  }
}

template <class S>
TITAN_INLINE void forward_rows(const AttentionHead& head, int64_t begin, int64_t end, float* out,
                               int64_t out_row, float* lse) {
  scratch.size_for(head.dh, head.dv);
  for (int64_t i0 = begin; i0 < end; i0 += kTileRows) {
    forward_tile<S>(head, i0, std::min(kTileRows, end - i0), out, out_row, lse);
  }
}

// FlashAttention-2's backward with keys outside and queries inside: for key tile j and each
// query tile i at or below it,
//   p = exp(q_i k_j^T scale - lse_i)            [m, n]
//   dv_j += p^T dout_i                           [n, Dv]
//   ds = p * (dout_i v_j^T - delta_i) * scale    [m, n]
//   dq_i += ds k_j,  dk_j += ds^T q_i            [m, Dh], [n, Dh]
template <class S>
TITAN_INLINE void backward_head(const AttentionHead& h, int64_t seq, const AttentionHeadGrads& g) {
  scratch.size_for(h.dh, h.dv);
  Scratch& w = scratch;
  float *p = w.scores.data(), *ds = w.probs.data();
  for (int64_t j0 = 0; j0 < seq; j0 += kTileKeys) {
    const int64_t n = std::min(kTileKeys, seq - j0);
    const float* k = h.k + j0 * h.k_row;
    transpose(k, h.k_row, n, h.dh, w.keys_t.data());                     // [Dh, n]
    transpose(h.v + j0 * h.v_row, h.v_row, n, h.dv, w.values_t.data());  // [Dv, n]
    for (int64_t i0 = j0 / kTileRows * kTileRows; i0 < seq; i0 += kTileRows) {
      const int64_t m = std::min(kTileRows, seq - i0);
      const float* q = h.q + i0 * h.q_row;
      const float* dout = g.dout + i0 * g.dout_row;
      gemm<S, false>(m, n, h.dh, q, h.q_row, 1, w.keys_t.data(), kTileKeys, p, kTileKeys);
      for (int64_t r = 0; r < m; ++r) {
        float* row = p + r * kTileKeys;
        const int64_t seen = visible_keys(i0 + r, j0, n);
        exp_row<S>(row, seen, h.scale, g.lse[i0 + r]);
        std::fill(row + seen, row + n, 0.0f);
      }
      gemm<S, true>(n, h.dv, m, p, 1, kTileKeys, dout, g.dout_row, g.dv + j0 * g.dv_row,
                    g.dv_row);
      gemm<S, false>(m, n, h.dv, dout, g.dout_row, 1, w.values_t.data(), kTileKeys, ds,
                     kTileKeys);
      for (int64_t r = 0; r < m; ++r) {
        const float delta = g.delta[i0 + r];
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = r * kTileKeys + j;
          ds[at] = p[at] * (ds[at] - delta) * h.scale;
        }
      }
      gemm<S, true>(m, h.dh, n, ds, kTileKeys, 1, k, h.k_row, g.dq + i0 * g.dq_row, g.dq_row);
      gemm<S, true>(n, h.dh, m, ds, 1, kTileKeys, q, h.q_row, g.dk + j0 * g.dk_row, g.dk_row);
    }
  }
}

// Each variant compiled for its instruction set; the templates above are inlined into them.
#define TITAN_FORWARD_ARGS                                                                    \
  const AttentionHead &head, int64_t begin, int64_t end, float *out, int64_t out_row, float *lse
#define TITAN_BACKWARD_ARGS const AttentionHead &head, int64_t seq, const AttentionHeadGrads &grads

__attribute__((target("arch=x86-64-v4"))) void forward_avx512(TITAN_FORWARD_ARGS) {
  forward_rows<Avx512>(head, begin, end, out, out_row, lse);
}
__attribute__((target("arch=x86-64-v3"))) void forward_avx2(TITAN_FORWARD_ARGS) {
  forward_rows<Avx2>(head, begin, end, out, out_row, lse);
}
void forward_baseline(TITAN_FORWARD_ARGS) { forward_rows<Sse>(head, begin, end, out, out_row, lse); }

__attribute__((target("arch=x86-64-v4"))) void backward_avx512(TITAN_BACKWARD_ARGS) {
  backward_head<Avx512>(head, seq, grads);
}
__attribute__((target("arch=x86-64-v3"))) void backward_avx2(TITAN_BACKWARD_ARGS) {
  backward_head<Avx2>(head, seq, grads);
}
void backward_baseline(TITAN_BACKWARD_ARGS) { backward_head<Sse>(head, seq, grads); }

}  // namespace

void attention_forward_rows(TITAN_FORWARD_ARGS) {
  switch (kernel_isa()) {
    case CpuIsa::kAvx512: return forward_avx512(head, begin, end, out, out_row, lse);
    case CpuIsa::kAvx2: return forward_avx2(head, begin, end, out, out_row, lse);
    case CpuIsa::kBaseline: return forward_baseline(head, begin, end, out, out_row, lse);
  }
}

void attention_backward_head(TITAN_BACKWARD_ARGS) {
  switch (kernel_isa()) {
    case CpuIsa::kAvx512: return backward_avx512(head, seq, grads);
    case CpuIsa::kAvx2: return backward_avx2(head, seq, grads);
    case CpuIsa::kBaseline: return backward_baseline(head, seq, grads);
  }
}

}  // namespace titan::models::kernels
