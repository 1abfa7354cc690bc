#include "titan/models/common/kernels/rms_norm.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "titan/platform/deferred_weight_grad.h"

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per task: about 32K elements.
int64_t grain(int64_t dim) { return std::max<int64_t>(1, (int64_t(1) << 15) / dim); }

// x: [N, D], w: [D] (acc) -> y: [N, D], rstd: [N] (acc). With `delta` [N, D] (residual form)
// the row normalised is h = x + delta, written to `h` [N, D] in the same pass.
template <typename scalar_t, typename acc_t>
void rms_norm_forward(const scalar_t* x, const scalar_t* delta, const acc_t* w, scalar_t* h,
                      scalar_t* y, acc_t* rstd, int64_t N, int64_t D, double eps) {
  at::parallel_for(0, N, grain(D), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const scalar_t* xi = x + i * D;
      if (delta) {
        const scalar_t* di = delta + i * D;
        scalar_t* hi = h + i * D;
        for (int64_t j = 0; j < D; ++j) hi[j] = scalar_t(acc_t(xi[j]) + acc_t(di[j]));
        xi = hi;
      }
      acc_t sum_sq = 0;
      for (int64_t j = 0; j < D; ++j) sum_sq += acc_t(xi[j]) * acc_t(xi[j]);
      const acc_t r = acc_t(1) / std::sqrt(sum_sq / acc_t(D) + acc_t(eps));
      rstd[i] = r;
      scalar_t* yi = y + i * D;
      for (int64_t j = 0; j < D; ++j) yi[j] = scalar_t(acc_t(xi[j]) * r * w[j]);
    }
  });
}

// dy, x: [N, D], w: [D] (acc), rstd: [N] (acc) -> dx: [N, D], dw_parts: [threads, D] (acc, each
// task's rows summed into its thread's row)
//   xhat = x * rstd, g = dy * w:  dx = rstd * (g - xhat * mean(g * xhat)),  dw = sum_rows dy * xhat
// With `dh` [N, D] (residual form: x is h, also used outside the norm) dx = dh + that.
template <typename scalar_t, typename acc_t>
void rms_norm_backward(const scalar_t* dy, const scalar_t* dh, const scalar_t* x, const acc_t* w,
                       const acc_t* rstd, scalar_t* dx, acc_t* dw_parts, int64_t N, int64_t D) {
  at::parallel_for(0, N, grain(D), [&](int64_t begin, int64_t end) {
    acc_t* dw = dw_parts + at::get_thread_num() * D;
    for (int64_t i = begin; i < end; ++i) {
      const scalar_t* dyi = dy + i * D;
      const scalar_t* xi = x + i * D;
      const acc_t r = rstd[i];
      acc_t dot = 0;
      for (int64_t j = 0; j < D; ++j) dot += acc_t(dyi[j]) * w[j] * acc_t(xi[j]) * r;
      const acc_t mean_dot = dot / acc_t(D);
      scalar_t* dxi = dx + i * D;
      for (int64_t j = 0; j < D; ++j) {
        const acc_t xhat = acc_t(xi[j]) * r;
        const acc_t through_norm = r * (acc_t(dyi[j]) * w[j] - xhat * mean_dot);
        dxi[j] = scalar_t(dh ? acc_t(dh[i * D + j]) + through_norm : through_norm);
        dw[j] += acc_t(dyi[j]) * xhat;
      }
    }
  });
}

torch::ScalarType acc_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat;
}

// Runs the forward kernel: y (and h when delta is defined) for the rows of x; rstd, the
// weight in the accumulation dtype and h (or x) are saved for backward.
variable_list norm_forward(AutogradContext* ctx, const torch::Tensor& x_in,
                           const torch::Tensor& delta_in, const torch::Tensor& weight,
                           double eps) {
  const int64_t D = x_in.size(-1), N = x_in.numel() / D;
  auto x = x_in.contiguous();                                         // x: [..., D]
  auto delta = delta_in.defined() ? delta_in.contiguous() : delta_in; // delta: [..., D]
  auto h = delta.defined() ? torch::empty_like(x) : x;                // h: [..., D]
  auto w = weight.to(acc_dtype(x)).contiguous();                      // w: [D]
  auto y = torch::empty_like(x);                                      // y: [..., D]
  auto rstd = torch::empty({N}, x.options().dtype(w.scalar_type()));  // rstd: [N]
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rms_norm_forward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    rms_norm_forward(x.data_ptr<scalar_t>(),
                     delta.defined() ? delta.data_ptr<scalar_t>() : nullptr,
                     w.data_ptr<acc_t>(), h.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                     rstd.data_ptr<acc_t>(), N, D, eps);
  });
  ctx->save_for_backward({h, w, rstd});
  ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
  return {h, y};
}

// The gradients of the normalised rows (dx, with `dh` added when defined) and of the weight.
variable_list norm_backward(AutogradContext* ctx, const torch::Tensor& dy_in,
                            const torch::Tensor& dh_in) {
  auto saved = ctx->get_saved_variables();
  const auto &x = saved[0], &w = saved[1], &rstd = saved[2];
  const int64_t D = x.size(-1), N = x.numel() / D;
  auto dy = dy_in.defined() ? dy_in.contiguous() : torch::zeros_like(x);  // dy: [..., D]
  auto dh = dh_in.defined() ? dh_in.contiguous() : dh_in;                 // dh: [..., D]
  auto dx = torch::empty_like(x);                                         // dx: [..., D]
  auto dw_parts = torch::zeros({at::get_num_threads(), D}, w.options());  // [threads, D]
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rms_norm_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    rms_norm_backward(dy.data_ptr<scalar_t>(), dh.defined() ? dh.data_ptr<scalar_t>() : nullptr,
                      x.data_ptr<scalar_t>(), w.data_ptr<acc_t>(), rstd.data_ptr<acc_t>(),
                      dx.data_ptr<scalar_t>(), dw_parts.data_ptr<acc_t>(), N, D);
  });
  const auto weight_dtype = static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
  return {dx, dw_parts.sum(0).to(weight_dtype)};  // dx: [..., D], dw: [D]
}

// The weight's gradient, computed with the input's in one pass: handed over, or kept for a
// zero-bubble weight pass.
torch::Tensor weight_grad(AutogradContext* ctx, size_t weight_input, const torch::Tensor& dw) {
  return platform::weight_grad(ctx, weight_input, [dw] { return dw; });
}

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps,
                               const platform::DeferredWeightGradPtr& slot) {
    platform::save_slot(ctx, slot);
    return norm_forward(ctx, x, torch::Tensor(), weight, eps)[1];
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto d = norm_backward(ctx, grads[0], torch::Tensor());
    return {d[0], weight_grad(ctx, 1, d[1]), torch::Tensor(), torch::Tensor()};
  }
};

struct ResidualRmsNormFn : public torch::autograd::Function<ResidualRmsNormFn> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& delta, const torch::Tensor& weight,
                               double eps, const platform::DeferredWeightGradPtr& slot) {
    platform::save_slot(ctx, slot);
    return norm_forward(ctx, x, delta, weight, eps);
  }

  // grads: {dh (from h's other uses), dy}; h = x + delta passes dh to both.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto d = norm_backward(ctx, grads[1], grads[0]);
    return {d[0], d[0], weight_grad(ctx, 2, d[1]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.device().is_cpu(), "rms_norm: the fused kernel runs on the CPU, got ", x.device());
  return platform::apply_deferrable<RmsNormFn>(/*weight_input=*/1, x, weight, eps);
}

std::pair<torch::Tensor, torch::Tensor> residual_rms_norm(const torch::Tensor& x,
                                                          const torch::Tensor& delta,
                                                          const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.device().is_cpu() && delta.device().is_cpu(),
              "residual_rms_norm: the fused kernel runs on the CPU, got ", x.device());
  TORCH_CHECK(x.sizes() == delta.sizes() && x.scalar_type() == delta.scalar_type(),
              "residual_rms_norm: x ", x.sizes(), " ", x.scalar_type(), " and delta ",
              delta.sizes(), " ", delta.scalar_type(), " differ");
  auto out = platform::apply_deferrable<ResidualRmsNormFn>(/*weight_input=*/2, x, delta, weight, eps);
  return {out[0], out[1]};
}

}  // namespace titan::models::kernels
