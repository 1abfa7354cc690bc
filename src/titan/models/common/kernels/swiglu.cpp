#include "titan/models/common/kernels/swiglu.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "titan/models/common/kernels/swiglu_rows.h"

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kGrain = int64_t(1) << 15;  // elements per task

// g, s, u: [n] -> out: [n] = g * s * u, s = sigmoid(g) in acc_t
template <typename scalar_t, typename acc_t>
void swiglu_forward(const scalar_t* g, const acc_t* s, const scalar_t* u, scalar_t* out,
                    int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = scalar_t(acc_t(g[i]) * s[i] * acc_t(u[i]));
  });
}

// dout, g, s, u: [n] -> dg, du: [n], s = sigmoid(g) in acc_t
//   du = dout * g * s,  dg = dout * u * s * (1 + g * (1 - s))
template <typename scalar_t, typename acc_t>
void swiglu_backward(const scalar_t* dout, const scalar_t* g, const acc_t* s, const scalar_t* u,
                     scalar_t* dg, scalar_t* du, int64_t n) {
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const acc_t gi = g[i], d = dout[i], si = s[i];
      du[i] = scalar_t(d * gi * si);
      dg[i] = scalar_t(d * acc_t(u[i]) * si * (acc_t(1) + gi * (acc_t(1) - si)));
    }
  });
}

// sigmoid(gate) [..., H] in the accumulation dtype: ATen's vectorised kernel (the exponential
// is most of the op's time; a scalar loop of std::exp made the fused op 3.5x slower than
// eager's, bench/NOTES.md). A temporary, not kept for backward.
torch::Tensor sigmoid_of(const torch::Tensor& gate) {
  return torch::sigmoid(gate.to(at::toOpMathType(gate.scalar_type())));
}

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate_in,
                               const torch::Tensor& up_in) {
    auto gate = gate_in.contiguous(), up = up_in.contiguous();  // [..., H] each
    auto out = torch::empty_like(gate);                         // out: [..., H]
    ctx->save_for_backward({gate, up});
    if (gate.scalar_type() == torch::kFloat) {
      const float *g = gate.data_ptr<float>(), *u = up.data_ptr<float>();
      float* o = out.data_ptr<float>();
      at::parallel_for(0, gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
        swiglu_forward_f32(g + begin, u + begin, o + begin, end - begin);
      });
      return out;
    }
    const auto sig = sigmoid_of(gate);  // sig: [..., H] float64, or float32 for bfloat16
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_forward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      swiglu_forward(gate.data_ptr<scalar_t>(), sig.data_ptr<acc_t>(), up.data_ptr<scalar_t>(),
                     out.data_ptr<scalar_t>(), gate.numel());
    });
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &gate = saved[0], &up = saved[1];
    auto dout = grads[0].contiguous();     // dout: [..., H]
    auto dgate = torch::empty_like(gate);  // dgate: [..., H]
    auto dup = torch::empty_like(up);      // dup: [..., H]
    if (gate.scalar_type() == torch::kFloat) {
      const float *d = dout.data_ptr<float>(), *g = gate.data_ptr<float>(),
                  *u = up.data_ptr<float>();
      float *dg = dgate.data_ptr<float>(), *du = dup.data_ptr<float>();
      at::parallel_for(0, gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
        swiglu_backward_f32(d + begin, g + begin, u + begin, dg + begin, du + begin,
                            end - begin);
      });
      return {dgate, dup};
    }
    const auto sig = sigmoid_of(gate);  // sig: [..., H] float64, or float32 for bfloat16
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, gate.scalar_type(), "swiglu_backward", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      swiglu_backward(dout.data_ptr<scalar_t>(), gate.data_ptr<scalar_t>(), sig.data_ptr<acc_t>(),
                      up.data_ptr<scalar_t>(), dgate.data_ptr<scalar_t>(), dup.data_ptr<scalar_t>(),
                      gate.numel());
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
