#include "titan/models/common/linear.h"

#include "titan/platform/deferred_weight_grad.h"

namespace titan::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x W^T with the weight's gradient deferrable; the products are torch::linear's.
struct LinearFn : public torch::autograd::Function<LinearFn> {
  // x: [..., in], w: [out, in] -> y: [..., out]
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const platform::DeferredWeightGradPtr& slot) {
    ctx->save_for_backward({x, w});
    platform::save_slot(ctx, slot);
    return torch::linear(x, w);
  }

  // dy: [..., out] -> dx: [..., in] = dy W;  dW: [out, in] = dy^T x (rows flattened)
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto& dy = grads[0];
    variable_list out(3);
    if (ctx->needs_input_grad(0)) out[0] = torch::matmul(dy, w);
    out[1] = platform::weight_grad(ctx, 1, [x, dy] {
      return torch::mm(dy.reshape({-1, dy.size(-1)}).t(), x.reshape({-1, x.size(-1)}));
    });
    return out;
  }
};

}  // namespace

torch::Tensor deferrable_linear(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!weight.requires_grad() || !platform::recording_weight_grads()) {
    return torch::linear(x, weight);
  }
  return platform::apply_deferrable<LinearFn>(/*weight_input=*/1, x, weight);
}

}  // namespace titan::models
