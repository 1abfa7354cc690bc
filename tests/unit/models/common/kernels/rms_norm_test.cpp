// Compile mode's RMSNorm kernel against the eager module (models/common/rmsnorm.h) and a
// float64 formula: forward and the gradients of x and weight. float64 to 1e-12 of the formula,
// float32 to 1e-5 relative of float64, bfloat16 to 1e-2 of the eager module in bfloat16 (one
// rounding instead of the eager composition's). Also a non-contiguous input (q/k norms see
// head slices) and more rows than one task (the threads' weight-gradient parts summed).
#include "titan/models/common/kernels/rms_norm.h"

#include <gtest/gtest.h>

#include "support/relative_error.h"
#include "titan/models/common/rmsnorm.h"

namespace titan::models::kernels {
namespace {

constexpr double kEps = 1e-6;

struct Result {
  torch::Tensor y, dx, dw;
};

// x: [..., D] -> y = x / sqrt(mean(x^2) + eps) * w, written out in float64.
Result formula(const torch::Tensor& x_in, const torch::Tensor& w_in, const torch::Tensor& dy) {
  auto x = x_in.to(torch::kFloat64).clone().requires_grad_();
  auto w = w_in.to(torch::kFloat64).clone().requires_grad_();
  auto y = x / torch::sqrt((x * x).mean(-1, true) + kEps) * w;
  y.backward(dy.to(torch::kFloat64));
  return {y.detach(), x.grad(), w.grad()};
}

template <typename Fn>
Result run(const torch::Tensor& x_in, const torch::Tensor& w_in, const torch::Tensor& dy, Fn fn) {
  auto x = x_in.clone().requires_grad_(), w = w_in.clone().requires_grad_();
  auto y = fn(x, w);
  y.backward(dy);
  return {y.detach(), x.grad(), w.grad()};
}

Result fused(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& dy) {
  return run(x, w, dy, [](auto& a, auto& b) { return rms_norm(a, b, kEps); });
}

using testing::max_rel;

void expect_near(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_rel(got.y, want.y), tol) << what << " y";
  EXPECT_LE(max_rel(got.dx, want.dx), tol) << what << " dx";
  EXPECT_LE(max_rel(got.dw, want.dw), tol) << what << " dw";
}

TEST(RmsNormKernel, MatchesTheFormulaInFloat64AndFloat32) {
  torch::manual_seed(3);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto x = torch::randn({3, 700, 24}, f64), w = torch::randn({24}, f64);
  auto dy = torch::randn({3, 700, 24}, f64);
  const auto want = formula(x, w, dy);
  expect_near(fused(x, w, dy), want, 1e-12, "float64");
  const auto f32 = fused(x.to(torch::kFloat), w.to(torch::kFloat), dy.to(torch::kFloat));
  EXPECT_EQ(f32.dw.scalar_type(), torch::kFloat);
  expect_near(f32, want, 1e-5, "float32");
}

TEST(RmsNormKernel, MatchesTheEagerModuleInBfloat16AndOnStridedInput) {
  torch::manual_seed(4);
  RMSNorm eager(16, kEps, torch::TensorOptions());
  auto x = torch::randn({2, 9, 4, 32}).narrow(-1, 8, 16);  // [2, 9, 4, 16], rows strided
  auto w = torch::randn({16}), dy = torch::randn({2, 9, 4, 16});
  auto via_module = [&](torch::Tensor& a, torch::Tensor& b) {
    eager->weight = b;
    return eager->forward(a);
  };
  expect_near(fused(x, w, dy), run(x, w, dy, via_module), 1e-5, "strided float32");
  auto xb = x.to(torch::kBFloat16), wb = w.to(torch::kBFloat16), dyb = dy.to(torch::kBFloat16);
  const auto got = fused(xb, wb, dyb);
  EXPECT_EQ(got.y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(got.dw.scalar_type(), torch::kBFloat16);
  expect_near(got, run(xb, wb, dyb, via_module), 1e-2, "bfloat16");
}

}  // namespace
}  // namespace titan::models::kernels
