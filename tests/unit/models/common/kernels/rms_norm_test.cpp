// Compile mode's RMSNorm kernel against the eager module (models/common/rmsnorm.h) and a
// float64 formula: forward and the gradients of x and weight. float64 to 1e-12 of the formula,
// float32 to 1e-5 relative of float64, bfloat16 to 1e-2 of the eager module in bfloat16 (one
// rounding instead of the eager composition's). Also a non-contiguous input (q/k norms see
// head slices) and more rows than one task (the threads' weight-gradient parts summed). The
// residual form (h = x + delta, then the norm of h) the same way, with a gradient reaching h
// from outside the norm as the block's residual stream gives it.
#include "titan/models/common/kernels/rms_norm.h"

#include <gtest/gtest.h>

#include "support/relative_error.h"
#include "titan/models/common/rmsnorm.h"

namespace titan::models::kernels {
namespace unit_models_common_kernels_rms_norm_test {

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

struct ResidualResult {
  torch::Tensor h, y, dx, ddelta, dw;
};

// Backward of sum(h * dh) + sum(y * dy) for {h, y} = fn(x, delta, w).
template <typename Fn>
ResidualResult run_residual(const std::vector<torch::Tensor>& in, const torch::Tensor& dh,
                            const torch::Tensor& dy, Fn fn) {
  auto x = in[0].clone().requires_grad_(), delta = in[1].clone().requires_grad_();
  auto w = in[2].clone().requires_grad_();
  auto [h, y] = fn(x, delta, w);
  torch::autograd::backward({h, y}, {dh, dy});
  return {h.detach(), y.detach(), x.grad(), delta.grad(), w.grad()};
}

std::pair<torch::Tensor, torch::Tensor> residual_formula(const torch::Tensor& x,
                                                         const torch::Tensor& delta,
                                                         const torch::Tensor& w) {
  auto h = x + delta;
  return {h, h / torch::sqrt((h * h).mean(-1, true) + kEps) * w};
}

std::pair<torch::Tensor, torch::Tensor> residual_fused(const torch::Tensor& x,
                                                       const torch::Tensor& delta,
                                                       const torch::Tensor& w) {
  return residual_rms_norm(x, delta, w, kEps);
}

void expect_near(const ResidualResult& got, const ResidualResult& want, double tol,
                 const std::string& what) {
  EXPECT_LE(max_rel(got.h, want.h), tol) << what << " h";
  EXPECT_LE(max_rel(got.y, want.y), tol) << what << " y";
  EXPECT_LE(max_rel(got.dx, want.dx), tol) << what << " dx";
  EXPECT_LE(max_rel(got.ddelta, want.ddelta), tol) << what << " ddelta";
  EXPECT_LE(max_rel(got.dw, want.dw), tol) << what << " dw";
}

std::vector<torch::Tensor> to(const std::vector<torch::Tensor>& ts, torch::ScalarType dtype) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts) out.push_back(t.to(dtype));
  return out;
}

TEST(ResidualRmsNormKernel, MatchesTheFormulaInFloat64AndFloat32) {
  torch::manual_seed(5);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const std::vector<torch::Tensor> in = {torch::randn({3, 700, 24}, f64),
                                         torch::randn({3, 700, 24}, f64), torch::randn({24}, f64)};
  auto dh = torch::randn({3, 700, 24}, f64), dy = torch::randn({3, 700, 24}, f64);
  const auto want = run_residual(in, dh, dy, residual_formula);
  expect_near(run_residual(in, dh, dy, residual_fused), want, 1e-12, "float64");
  const auto f32 = run_residual(to(in, torch::kFloat), dh.to(torch::kFloat),
                                dy.to(torch::kFloat), residual_fused);
  expect_near(f32, want, 1e-5, "float32");
}

TEST(ResidualRmsNormKernel, MatchesTheEagerAddAndModuleInBfloat16) {
  torch::manual_seed(6);
  RMSNorm eager(16, kEps, torch::TensorOptions());
  auto eager_form = [&](const torch::Tensor& x, const torch::Tensor& delta,
                        const torch::Tensor& w) {
    eager->weight = w;
    auto h = x + delta;
    return std::pair{h, eager->forward(h)};
  };
  const auto in = to({torch::randn({2, 9, 16}), torch::randn({2, 9, 16}), torch::randn({16})},
                     torch::kBFloat16);
  auto dh = torch::randn({2, 9, 16}).to(torch::kBFloat16);
  auto dy = torch::randn({2, 9, 16}).to(torch::kBFloat16);
  const auto got = run_residual(in, dh, dy, residual_fused);
  EXPECT_EQ(got.h.scalar_type(), torch::kBFloat16);
  expect_near(got, run_residual(in, dh, dy, eager_form), 1e-2, "bfloat16");
}

TEST(ResidualRmsNormKernel, RefusesMismatchedInputs) {
  auto x = torch::randn({2, 8}), w = torch::ones({8});
  EXPECT_THROW(residual_rms_norm(x, torch::randn({2, 4}), w, kEps), c10::Error);
  EXPECT_THROW(residual_rms_norm(x, torch::randn({2, 8}, torch::kFloat64), w, kEps), c10::Error);
}

}  // namespace unit_models_common_kernels_rms_norm_test
}  // namespace titan::models::kernels
