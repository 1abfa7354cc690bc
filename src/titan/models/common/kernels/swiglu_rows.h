// The loops of compile mode's SwiGLU gate (kernels/swiglu.h) in float32, vectorised with the
// Cephes exponential of simd.h: each element's sigmoid is computed where it is used, so
// forward reads the gate and up once and writes the product (eager's silu and product make
// five passes), and backward reads the upstream gradient, gate and up once and writes both
// gradients. Compiled once per variant (x86-64-v4, x86-64-v3, baseline x86-64); kernel_isa()
// (cpu_isa.h) picks the one that runs.
#pragma once

#include <cstdint>

namespace titan::models::kernels {

/// g, u: [n] -> out: [n] = g * sigmoid(g) * u.
void swiglu_forward_f32(const float* g, const float* u, float* out, int64_t n);

/// dout, g, u: [n] -> dg, du: [n] with s = sigmoid(g):
///   du = dout * g * s,  dg = dout * u * s * (1 + g * (1 - s)).
void swiglu_backward_f32(const float* dout, const float* g, const float* u, float* dg, float* du,
                         int64_t n);

}  // namespace titan::models::kernels
