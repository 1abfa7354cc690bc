// Compile mode's RoPE against the eager apply_rope / apply_rope_interleaved: forward and the
// input gradient, float64 to 1e-12, float32 to 1e-6 relative of float64, bfloat16 to 1e-2 of
// the eager composition in bfloat16; strided inputs (MLA's narrowed rope columns), Llama 3.1's
// scaled frequencies, and angles whose two halves differ (the backward is the transpose, not
// only for rope_cos_sin's repeated angles).
#include "titan/models/common/kernels/rope.h"

#include <gtest/gtest.h>

#include "support/relative_error.h"
#include "titan/models/common/rope.h"

namespace titan::models::kernels {
namespace unit_models_common_kernels_rope_test {

struct Result {
  torch::Tensor out, dx;
};

template <typename Fn>
Result run(const torch::Tensor& x_in, const torch::Tensor& dout, Fn fn) {
  auto x = x_in.clone().requires_grad_();
  auto out = fn(x);
  out.backward(dout);
  return {out.detach(), x.grad()};
}

Result eager(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
             RopeLayout layout, const torch::Tensor& dout) {
  return run(x, dout, [&](const torch::Tensor& t) {
    return layout == RopeLayout::kHalves ? apply_rope(t, cos, sin)
                                         : apply_rope_interleaved(t, cos, sin);
  });
}

Result fused(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
             RopeLayout layout, const torch::Tensor& dout) {
  return run(x, dout, [&](const torch::Tensor& t) { return rope(t, cos, sin, layout); });
}

using testing::max_rel;

void expect_near(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_rel(got.out, want.out), tol) << what << " out";
  EXPECT_LE(max_rel(got.dx, want.dx), tol) << what << " dx";
}

class RopeKernel : public ::testing::TestWithParam<RopeLayout> {};

TEST_P(RopeKernel, MatchesTheEagerCompositionInEveryDtype) {
  const RopeLayout layout = GetParam();
  torch::manual_seed(9);
  RopeOptions options;
  options.head_dim = 32;
  options.theta = 500000.0;
  options.scaling = RopeScaling{};
  const auto inv_freq = rope_inv_freq(options);
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    auto [cos, sin] = rope_cos_sin(inv_freq, 96, dtype, torch::kCPU);  // each [96, 32]
    auto x = torch::randn({3, 96, 5, 32}, torch::kFloat64);           // x: [B, S, H, Dh]
    auto dout = torch::randn({3, 96, 5, 32}, torch::kFloat64);
    const auto f64 = rope_cos_sin(inv_freq, 96, torch::kFloat64, torch::kCPU);
    const auto want = eager(x, f64.first, f64.second, layout, dout);  // the float64 reference
    const double tol = dtype == torch::kFloat64 ? 1e-12 : 1e-6;
    const std::string what = dtype == torch::kFloat64 ? "float64" : "float32";
    expect_near(fused(x.to(dtype), cos, sin, layout, dout.to(dtype)), want, tol, what);
    if (dtype == torch::kFloat32) {
      // Strided: every other column of a wider tensor (as MLA narrows q to its rope part).
      auto wide = torch::randn({3, 96, 5, 64});
      auto strided = wide.narrow(-1, 32, 32);
      expect_near(fused(strided, cos, sin, layout, dout.to(dtype)),
                  eager(strided, cos, sin, layout, dout.to(dtype)), 1e-6, "strided float32");
      auto xb = x.to(torch::kBFloat16), db = dout.to(torch::kBFloat16);
      expect_near(fused(xb, cos, sin, layout, db), eager(xb, cos, sin, layout, db), 1e-2,
                  "bfloat16");
    }
  }
}

TEST_P(RopeKernel, BackwardIsTheTransposeForAnyAngles) {
  torch::manual_seed(10);
  auto x = torch::randn({2, 7, 3, 8}, torch::kFloat64);
  auto dout = torch::randn({2, 7, 3, 8}, torch::kFloat64);
  auto cos = torch::randn({7, 8}, torch::kFloat64), sin = torch::randn({7, 8}, torch::kFloat64);
  expect_near(fused(x, cos, sin, GetParam(), dout), eager(x, cos, sin, GetParam(), dout), 1e-12,
              "random angles");
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeKernel,
                         ::testing::Values(RopeLayout::kHalves, RopeLayout::kInterleaved),
                         [](const auto& info) {
                           return info.param == RopeLayout::kHalves ? "Halves" : "Interleaved";
                         });

TEST(RopeKernelChecks, RefusesMismatchedAngles) {
  const auto cos = torch::ones({4, 8}), sin = torch::zeros({4, 8});
  EXPECT_THROW(rope(torch::zeros({1, 5, 2, 8}), cos, sin, RopeLayout::kHalves), c10::Error);
  EXPECT_THROW(rope(torch::zeros({1, 4, 2, 8}), cos, sin.to(torch::kFloat64),
                    RopeLayout::kHalves),
               c10::Error);
}

}  // namespace unit_models_common_kernels_rope_test
}  // namespace titan::models::kernels
