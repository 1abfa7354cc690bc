// The vector types and the vectorised exponential of compile mode's hand-vectorised kernels
// (the attention tiles, the SwiGLU gate), for sources compiled once per instruction set: each
// variant is a function with a target attribute that instantiates these templates for its own
// Simd (cpu_isa.h picks the variant that runs). Include it only from such sources: its
// templates must inline into the variants.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

// The vector types never cross a call (every helper is inlined), so GCC's note that passing
// them changes the ABI without AVX-512 does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace titan::models::kernels::simd {

// The vectors of one instruction set: L floats a register, GEMM tiles of MR rows x 2 vectors.
// The MR x 2 accumulators and the 2 vectors of B must fit the register file (AVX-512: 32 zmm,
// 16 + 2 of them; AVX2 and SSE: 16 ymm / xmm, 12 + 2): a vector wider than the machine's, or
// more accumulators than registers, is kept in memory by GCC, every update a load and a store
// (a 16-float vector on AVX2 made the kernel 5x slower than eager).
template <int L, int MR>
struct Simd {
  static constexpr int64_t kLanes = L;
  static constexpr int kRows = MR;
  typedef float Vec __attribute__((vector_size(4 * L)));
  typedef int32_t VecInt __attribute__((vector_size(4 * L)));
};
using Avx512 = Simd<16, 8>;
using Avx2 = Simd<8, 6>;
using Sse = Simd<4, 6>;

#define TITAN_INLINE inline __attribute__((always_inline))

template <class S>
TITAN_INLINE typename S::Vec load_vec(const float* p) {
  typename S::Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class S>
TITAN_INLINE void store_vec(float* p, typename S::Vec v) {
  std::memcpy(p, &v, sizeof v);
}

// exp(x), Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-7 polynomial, 2^n by the
// exponent bits. Arguments are clamped to [-87, 88] (e^-87 ~ 1.6e-38 stands for 0). About 1
// ulp. T: float or S::Vec.
template <class S, typename T>
TITAN_INLINE T exp_cephes(T x) {
  const T lo = T{} - 87.0f, hi = T{} + 88.0f;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const T shifter = T{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const T n = (x * 1.44269504088896341f + shifter) - shifter;
  T r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  T p = T{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const T y = p * r * r + r + 1.0f;
  if constexpr (std::is_same_v<T, float>) {
    return y * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  } else {
    using VecInt = typename S::VecInt;
    return y * std::bit_cast<T>((__builtin_convertvector(n, VecInt) + 127) << 23);
  }
}

}  // namespace titan::models::kernels::simd
