// Compile mode's SwiGLU gate against silu(gate) * up: forward and both input gradients,
// float64 to 1e-12, float32 to 1e-6 relative of float64, bfloat16 to 1e-2 of the eager
// composition in bfloat16; more elements than one task, and strided inputs.
#include "titan/models/common/kernels/swiglu.h"

#include <gtest/gtest.h>

#include "support/relative_error.h"

namespace titan::models::kernels {
namespace unit_models_common_kernels_swiglu_test {

struct Result {
  torch::Tensor out, dgate, dup;
};

template <typename Fn>
Result run(const torch::Tensor& g_in, const torch::Tensor& u_in, const torch::Tensor& dout, Fn fn) {
  auto g = g_in.clone().requires_grad_(), u = u_in.clone().requires_grad_();
  auto out = fn(g, u);
  out.backward(dout);
  return {out.detach(), g.grad(), u.grad()};
}

Result eager(const torch::Tensor& g, const torch::Tensor& u, const torch::Tensor& dout) {
  return run(g, u, dout, [](auto& a, auto& b) { return torch::silu(a) * b; });
}

Result fused(const torch::Tensor& g, const torch::Tensor& u, const torch::Tensor& dout) {
  return run(g, u, dout, [](auto& a, auto& b) { return swiglu(a, b); });
}

using testing::max_rel;

void expect_near(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_rel(got.out, want.out), tol) << what << " out";
  EXPECT_LE(max_rel(got.dgate, want.dgate), tol) << what << " d gate";
  EXPECT_LE(max_rel(got.dup, want.dup), tol) << what << " d up";
}

TEST(SwigluKernel, MatchesTheEagerCompositionInEveryDtype) {
  torch::manual_seed(8);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto g = 4 * torch::randn({5, 300, 48}, f64), u = torch::randn({5, 300, 48}, f64);
  auto dout = torch::randn({5, 300, 48}, f64);
  const auto want = eager(g, u, dout);
  expect_near(fused(g, u, dout), want, 1e-12, "float64");
  auto gf = g.to(torch::kFloat), uf = u.to(torch::kFloat), df = dout.to(torch::kFloat);
  expect_near(fused(gf, uf, df), want, 1e-6, "float32");
  expect_near(fused(gf.transpose(0, 1), uf.transpose(0, 1), df.transpose(0, 1)),
              eager(gf.transpose(0, 1), uf.transpose(0, 1), df.transpose(0, 1)), 1e-6,
              "strided float32");
  auto gb = g.to(torch::kBFloat16), ub = u.to(torch::kBFloat16), db = dout.to(torch::kBFloat16);
  expect_near(fused(gb, ub, db), eager(gb, ub, db), 1e-2, "bfloat16");
}

TEST(SwigluKernel, RefusesMismatchedInputs) {
  EXPECT_THROW(swiglu(torch::zeros({2, 3}), torch::zeros({3, 2})), c10::Error);
  EXPECT_THROW(swiglu(torch::zeros({2}), torch::zeros({2}, torch::kFloat64)), c10::Error);
}

}  // namespace unit_models_common_kernels_swiglu_test
}  // namespace titan::models::kernels
