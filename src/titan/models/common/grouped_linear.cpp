#include "titan/models/common/grouped_linear.h"

#include "titan/platform/deferred_weight_grad.h"

namespace titan::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GroupedLinearFn : public torch::autograd::Function<GroupedLinearFn> {
  // x: [N, in], w: [E, out, in] -> y: [N, out]
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::vector<int64_t>& counts,
                               const platform::DeferredWeightGradPtr& slot) {
    ctx->save_for_backward({x, w});
    platform::save_slot(ctx, slot);
    ctx->saved_data["counts"] = counts;
    auto y = torch::empty({x.size(0), w.size(1)}, x.options());  // [N, out]
    int64_t start = 0;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (counts[e] == 0) continue;
      auto y_e = y.narrow(0, start, counts[e]);                     // [n_e, out]
      torch::mm_out(y_e, x.narrow(0, start, counts[e]), w[e].t());  // [n_e, in] x [in, out]
      start += counts[e];
    }
    return y;
  }

  // dy: [N, out] -> dx: [N, in] = dy_e w[e];  dw[e]: [out, in] = dy_e^T x_e
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const auto counts = ctx->saved_data["counts"].toIntVector();
    auto dy = grad_out[0].contiguous();
    auto dx = torch::empty_like(x);  // [N, in]
    int64_t start = 0;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (counts[e] == 0) continue;
      auto dx_e = dx.narrow(0, start, counts[e]);  // [n_e, in]
      torch::mm_out(dx_e, dy.narrow(0, start, counts[e]), w[e]);
      start += counts[e];
    }
    auto dw = platform::weight_grad(ctx, 1, [x, w, dy, counts] {
      auto dw = torch::zeros_like(w);  // [E, out, in]
      int64_t start = 0;
      for (size_t e = 0; e < counts.size(); ++e) {
        if (counts[e] == 0) continue;
        auto dw_e = dw[e];  // [out, in]
        torch::mm_out(dw_e, dy.narrow(0, start, counts[e]).t(), x.narrow(0, start, counts[e]));
        start += counts[e];
      }
      return dw;
    });
    return {dx, dw, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor grouped_linear(const torch::Tensor& x, const torch::Tensor& w,
                             const std::vector<int64_t>& counts) {
  return platform::apply_deferrable<GroupedLinearFn>(/*weight_input=*/1, x, w, counts);
}

}  // namespace titan::models
