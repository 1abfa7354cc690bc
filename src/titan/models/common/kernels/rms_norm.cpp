#include "titan/models/common/kernels/rms_norm.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per task: about 32K elements.
int64_t grain(int64_t dim) { return std::max<int64_t>(1, (int64_t(1) << 15) / dim); }

// x: [N, D], w: [D] (acc) -> y: [N, D], rstd: [N] (acc)
template <typename scalar_t, typename acc_t>
void rms_norm_forward(const scalar_t* x, const acc_t* w, scalar_t* y, acc_t* rstd, int64_t N,
                      int64_t D, double eps) {
  at::parallel_for(0, N, grain(D), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const scalar_t* xi = x + i * D;
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
template <typename scalar_t, typename acc_t>
void rms_norm_backward(const scalar_t* dy, const scalar_t* x, const acc_t* w, const acc_t* rstd,
                       scalar_t* dx, acc_t* dw_parts, int64_t N, int64_t D) {
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
        dxi[j] = scalar_t(r * (acc_t(dyi[j]) * w[j] - xhat * mean_dot));
        dw[j] += acc_t(dyi[j]) * xhat;
      }
    }
  });
}

torch::ScalarType acc_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat;
}

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& weight, double eps) {
    const int64_t D = x_in.size(-1), N = x_in.numel() / D;
    auto x = x_in.contiguous();                                         // x: [..., D]
    auto w = weight.to(acc_dtype(x)).contiguous();                      // w: [D]
    auto y = torch::empty_like(x);                                      // y: [..., D]
    auto rstd = torch::empty({N}, x.options().dtype(w.scalar_type()));  // rstd: [N]
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rms_norm_forward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      rms_norm_forward(x.data_ptr<scalar_t>(), w.data_ptr<acc_t>(), y.data_ptr<scalar_t>(),
                       rstd.data_ptr<acc_t>(), N, D, eps);
    });
    ctx->save_for_backward({x, w, rstd});
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &rstd = saved[2];
    const int64_t D = x.size(-1), N = x.numel() / D;
    auto dy = grads[0].contiguous();                                        // dy: [..., D]
    auto dx = torch::empty_like(x);                                         // dx: [..., D]
    auto dw_parts = torch::zeros({at::get_num_threads(), D}, w.options());  // [threads, D]
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "rms_norm_backward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      rms_norm_backward(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), w.data_ptr<acc_t>(),
                        rstd.data_ptr<acc_t>(), dx.data_ptr<scalar_t>(), dw_parts.data_ptr<acc_t>(),
                        N, D);
    });
    const auto weight_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    return {dx, dw_parts.sum(0).to(weight_dtype), torch::Tensor()};  // dw: [D]
  }
};

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.device().is_cpu(), "rms_norm: the fused kernel runs on the CPU, got ", x.device());
  return RmsNormFn::apply(x, weight, eps);
}

}  // namespace titan::models::kernels
