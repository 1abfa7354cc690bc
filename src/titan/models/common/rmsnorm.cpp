#include "titan/models/common/rmsnorm.h"

#include "titan/platform/deferred_weight_grad.h"

namespace titan::models {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options)
    : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}, options));
  init = InitRule::ones();
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y * w with the weight's gradient deferrable by a zero-bubble input pass: aten's multiply and
// its backward, in two halves.
struct ScaleFn : public torch::autograd::Function<ScaleFn> {
  // y: [..., dim], w: [dim] -> [..., dim]
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& y, const torch::Tensor& w,
                               const platform::DeferredWeightGradPtr& slot) {
    ctx->save_for_backward({y, w});
    platform::save_slot(ctx, slot);
    return y * w;
  }

  // dy: [..., dim] -> dy * w: [..., dim];  dw: [dim] = (dy * y) summed over the rows
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &y = saved[0], &w = saved[1];
    const auto& dy = grads[0];
    variable_list out(3);
    if (ctx->needs_input_grad(0)) out[0] = dy * w;
    out[1] = platform::weight_grad(ctx, 1, [y, dy, sizes = w.sizes().vec()] {
      return (dy * y).sum_to_size(sizes);
    });
    return out;
  }
};

torch::Tensor scale(const torch::Tensor& y, const torch::Tensor& w) {
  if (!w.requires_grad() || !platform::recording_weight_grads()) return y * w;
  return platform::apply_deferrable<ScaleFn>(/*weight_input=*/1, y, w);
}

// x: [..., dim], weight: [dim] -> [..., dim] in x's dtype.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const auto dtype = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto xf = x.to(dtype);                                                    // xf: [..., dim]
  auto inv_rms = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);  // inv_rms: [..., 1]
  return scale(xf * inv_rms, weight.to(dtype)).to(x.scalar_type());  // [..., dim]
}

}  // namespace

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return compute({x, weight}, [eps = eps](const std::vector<torch::Tensor>& in) {
    return rms_norm(in[0], in[1], eps);
  });
}

}  // namespace titan::models
