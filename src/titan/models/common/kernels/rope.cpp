#include "titan/models/common/kernels/rope.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One head's rotation by the angles of its position, forward (sign +1) or backward (sign -1:
// the transpose of a rotation is the rotation by minus the angle, which is also the gradient).
//   in, out: [Dh]; c, s: [Dh] (halves) or their first Dh/2 entries (interleaved)
template <typename scalar_t, typename acc_t>
void rotate_halves(const scalar_t* in, scalar_t* out, const acc_t* c, const acc_t* s, int64_t dh,
                   acc_t sign) {
  const int64_t half = dh / 2;
  // Forward: y1 = x1 c1 - x2 s1, y2 = x2 c2 + x1 s2; its transpose swaps which half's sin
  // each output reads (the same number for rope_cos_sin's repeated angles).
  const acc_t* s_lo = sign > 0 ? s : s + half;
  const acc_t* s_hi = sign > 0 ? s + half : s;
  for (int64_t i = 0; i < half; ++i) {
    const acc_t a = in[i], b = in[i + half];
    out[i] = scalar_t(a * c[i] - sign * b * s_lo[i]);
    out[i + half] = scalar_t(b * c[i + half] + sign * a * s_hi[i]);
  }
}

template <typename scalar_t, typename acc_t>
void rotate_interleaved(const scalar_t* in, scalar_t* out, const acc_t* c, const acc_t* s,
                        int64_t dh, acc_t sign) {
  for (int64_t i = 0; i < dh / 2; ++i) {
    const acc_t a = in[2 * i], b = in[2 * i + 1];
    out[2 * i] = scalar_t(a * c[i] - sign * b * s[i]);
    out[2 * i + 1] = scalar_t(b * c[i] + sign * a * s[i]);
  }
}

// in, out: [B, S, H, Dh] contiguous; cos, sin: [S, Dh] contiguous (acc_t). Rows of H heads
// (one position each) split over the threads.
template <typename scalar_t, typename acc_t>
void rotate(const torch::Tensor& in, torch::Tensor& out, const torch::Tensor& cos,
            const torch::Tensor& sin, RopeLayout layout, acc_t sign) {
  const int64_t S = in.size(1), H = in.size(2), Dh = in.size(3);
  const scalar_t* x = in.data_ptr<scalar_t>();
  scalar_t* y = out.data_ptr<scalar_t>();
  const acc_t* c = cos.data_ptr<acc_t>();
  const acc_t* s = sin.data_ptr<acc_t>();
  const int64_t rows = in.size(0) * S;
  at::parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 14) / (H * Dh)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const acc_t* cr = c + (r % S) * Dh;  // this position's angles
                       const acc_t* sr = s + (r % S) * Dh;
                       for (int64_t h = 0; h < H; ++h) {
                         const int64_t at = (r * H + h) * Dh;
                         if (layout == RopeLayout::kHalves) {
                           rotate_halves(x + at, y + at, cr, sr, Dh, sign);
                         } else {
                           rotate_interleaved(x + at, y + at, cr, sr, Dh, sign);
                         }
                       }
                     }
                   });
}

// x: [B, S, H, Dh] -> [B, S, H, Dh] rotated by +angle (sign 1) or -angle (sign -1).
torch::Tensor rotated(const torch::Tensor& x_in, const torch::Tensor& cos,
                      const torch::Tensor& sin, RopeLayout layout, double sign) {
  auto x = x_in.contiguous();       // x: [B, S, H, Dh]
  auto out = torch::empty_like(x);  // out: [B, S, H, Dh]
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rope", [&] {
    using x_t = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(cos.scalar_type(), "rope_angles", [&] {
      rotate<x_t, scalar_t>(x, out, cos, sin, layout, scalar_t(sign));
    });
  });
  return out;
}

struct RopeFn : public torch::autograd::Function<RopeFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin,
                               int64_t layout) {
    ctx->saved_data["cos"] = cos;  // the cached angles, not activations
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["layout"] = layout;
    return rotated(x, cos, sin, RopeLayout(layout), 1.0);  // [B, S, H, Dh]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto layout = RopeLayout(ctx->saved_data["layout"].toInt());
    auto dx = rotated(grads[0], ctx->saved_data["cos"].toTensor(),
                      ctx->saved_data["sin"].toTensor(), layout, -1.0);  // dx: [B, S, H, Dh]
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                   RopeLayout layout) {
  TORCH_CHECK(x.dim() == 4 && x.size(-1) % 2 == 0 && cos.dim() == 2 &&
                  cos.size(0) == x.size(1) && cos.size(1) == x.size(3) &&
                  sin.sizes() == cos.sizes() && sin.scalar_type() == cos.scalar_type(),
              "rope: x [B, S, H, Dh] (Dh even), cos and sin [S, Dh] of one dtype; got ",
              x.sizes(), ", ", cos.sizes(), " ", cos.scalar_type(), ", ", sin.sizes(), " ",
              sin.scalar_type());
  TORCH_CHECK(x.device().is_cpu() && cos.device().is_cpu() && sin.device().is_cpu(),
              "rope: the fused kernel runs on the CPU, got ", x.device());
  return RopeFn::apply(x, cos.contiguous(), sin.contiguous(), static_cast<int64_t>(layout));
}

}  // namespace titan::models::kernels
