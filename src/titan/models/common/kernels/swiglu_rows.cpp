#include "titan/models/common/kernels/swiglu_rows.h"

#include "titan/models/common/kernels/cpu_isa.h"
#include "titan/models/common/kernels/simd.h"

namespace titan::models::kernels {
namespace {

using namespace simd;  // NOLINT: this file is one of its variants' sources

// sigmoid(x) = 1 / (1 + e^-x); T: float or S::Vec. e^-x clamps at e^88 for x < -88, where the
// sigmoid is then 6e-39 instead of smaller: silu(x) = x * sigmoid(x) stays within 1e-36 of 0.
template <class S, typename T>
TITAN_INLINE T sigmoid(T x) {
  return 1.0f / (exp_cephes<S>(T{} - x) + 1.0f);
}

template <class S>
TITAN_INLINE void forward(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) {
    const auto gi = load_vec<S>(g + i);
    store_vec<S>(out + i, gi * sigmoid<S>(gi) * load_vec<S>(u + i));
  }
  for (; i < n; ++i) out[i] = g[i] * sigmoid<S>(g[i]) * u[i];
}

template <class S, typename T>
TITAN_INLINE void grads(T d, T gi, T ui, T& dg, T& du) {
  const T s = sigmoid<S>(gi);
  du = d * gi * s;
  dg = d * ui * s * (gi * (1.0f - s) + 1.0f);
}

template <class S>
TITAN_INLINE void backward(const float* dout, const float* g, const float* u, float* dg,
                           float* du, int64_t n) {
  int64_t i = 0;
  for (; i + S::kLanes <= n; i += S::kLanes) {
    typename S::Vec dgi, dui;
    grads<S>(load_vec<S>(dout + i), load_vec<S>(g + i), load_vec<S>(u + i), dgi, dui);
    store_vec<S>(dg + i, dgi);
    store_vec<S>(du + i, dui);
  }
  for (; i < n; ++i) grads<S>(dout[i], g[i], u[i], dg[i], du[i]);
}

#define TITAN_FORWARD_ARGS const float *g, const float *u, float *out, int64_t n
#define TITAN_BACKWARD_ARGS \
  const float *dout, const float *g, const float *u, float *dg, float *du, int64_t n

__attribute__((target("arch=x86-64-v4"))) void forward_avx512(TITAN_FORWARD_ARGS) {
  forward<Avx512>(g, u, out, n);
}
__attribute__((target("arch=x86-64-v3"))) void forward_avx2(TITAN_FORWARD_ARGS) {
  forward<Avx2>(g, u, out, n);
}
void forward_baseline(TITAN_FORWARD_ARGS) { forward<Sse>(g, u, out, n); }

__attribute__((target("arch=x86-64-v4"))) void backward_avx512(TITAN_BACKWARD_ARGS) {
  backward<Avx512>(dout, g, u, dg, du, n);
}
__attribute__((target("arch=x86-64-v3"))) void backward_avx2(TITAN_BACKWARD_ARGS) {
  backward<Avx2>(dout, g, u, dg, du, n);
}
void backward_baseline(TITAN_BACKWARD_ARGS) { backward<Sse>(dout, g, u, dg, du, n); }

}  // namespace

void swiglu_forward_f32(TITAN_FORWARD_ARGS) {
  switch (kernel_isa()) {
    case CpuIsa::kAvx512: return forward_avx512(g, u, out, n);
    case CpuIsa::kAvx2: return forward_avx2(g, u, out, n);
    case CpuIsa::kBaseline: return forward_baseline(g, u, out, n);
  }
}

void swiglu_backward_f32(TITAN_BACKWARD_ARGS) {
  switch (kernel_isa()) {
    case CpuIsa::kAvx512: return backward_avx512(dout, g, u, dg, du, n);
    case CpuIsa::kAvx2: return backward_avx2(dout, g, u, dg, du, n);
    case CpuIsa::kBaseline: return backward_baseline(dout, g, u, dg, du, n);
  }
}

}  // namespace titan::models::kernels
