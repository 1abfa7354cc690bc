#include "titan/models/common/kernels/swiglu.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kGrain = int64_t(1) << 15;  // elements per task

// g, u: [n] -> out: [n] = g * sigmoid(g) * u
template <typename scalar_t>
void swiglu_forward(const scalar_t* g, const scalar_t* u, scalar_t* out, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const acc_t gi = g[i], s = acc_t(1) / (acc_t(1) + std::exp(-gi));
      out[i] = scalar_t(gi * s * acc_t(u[i]));
    }
  });
}

// dout, g, u: [n] -> dg, du: [n]
//   s = sigmoid(g):  du = dout * g * s,  dg = dout * u * s * (1 + g * (1 - s))
template <typename scalar_t>
void swiglu_backward(const scalar_t* dout, const scalar_t* g, const scalar_t* u, scalar_t* dg,
                     scalar_t* du, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const acc_t gi = g[i], d = dout[i], s = acc_t(1) / (acc_t(1) + std::exp(-gi));
      du[i] = scalar_t(d * gi * s);
      dg[i] = scalar_t(d * acc_t(u[i]) * s * (acc_t(1) + gi * (acc_t(1) - s)));
    }
  });
}

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_in,
                               const torch::Tensor& up_in) {
    auto gate = gate_in.contiguous(), up = up_in.contiguous();  // [..., H] each
    auto out = torch::empty_like(gate);                         // out: [..., H]
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_forward", [&] {
      swiglu_forward(gate.data_ptr<scalar_t>(), up.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                     gate.numel());
    });
    ctx->save_for_backward({gate, up});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &gate = saved[0], &up = saved[1];
    auto dout = grads[0].contiguous();     // dout: [..., H]
    auto dgate = torch::empty_like(gate);  // dgate: [..., H]
    auto dup = torch::empty_like(up);      // dup: [..., H]
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_backward", [&] {
      swiglu_backward(dout.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), up.data_ptr<scalar_t>(),
                      dgate.data_ptr<scalar_t>(), dup.data_ptr<scalar_t>(), gate.numel());
    });
    return {dgate, dup};
  }
};

}  // namespace

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  TORCH_CHECK(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type(), "swiglu: gate ",
              gate.sizes(), " ", gate.scalar_type(), " and up ", up.sizes(), " ", up.scalar_type(),
              " must match");
  TORCH_CHECK(gate.device().is_cpu(), "swiglu: the fused kernel runs on the CPU, got ",
              gate.device());
  return SwigluFn::apply(gate, up);
}

}  // namespace titan::models::kernels
