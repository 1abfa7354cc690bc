// Compile mode's SwiGLU gate against silu(gate) * up: forward and both input gradients,
// float64 to 1e-12, float32 (each vectorised variant this CPU runs) to 1e-6 relative of
// float64, bfloat16 to 1e-2 of the eager composition in bfloat16; more elements than one task,
// lengths that leave a partial vector, strided inputs, and gates far beyond the exponential's
// range.
#include "titan/models/common/kernels/swiglu.h"

#include <gtest/gtest.h>

#include "support/kernel_isa.h"
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

struct Inputs {
  torch::Tensor g, u, dout;  // [5, 300, 47] float64 each
};

// 47 columns: no vector width divides a row. The gate spans +-4 sigma of 4, and its first row
// +-100 (the sigmoid's exponential clamps beyond 88).
Inputs inputs() {
  torch::manual_seed(8);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto g = 4 * torch::randn({5, 300, 47}, f64);
  g[0][0].copy_(torch::linspace(-100, 100, 47, f64));
  return {g, torch::randn({5, 300, 47}, f64), torch::randn({5, 300, 47}, f64)};
}

class SwigluVariant : public testing::EachKernelIsa {};

TEST_P(SwigluVariant, Float32MatchesTheFloat64Composition) {
  const auto in = inputs();
  const auto want = eager(in.g, in.u, in.dout);
  const auto f32 = [](const torch::Tensor& t) { return t.to(torch::kFloat); };
  auto gf = f32(in.g), uf = f32(in.u), df = f32(in.dout);
  expect_near(fused(gf, uf, df), want, 1e-6, "float32");
  expect_near(fused(gf.transpose(0, 1), uf.transpose(0, 1), df.transpose(0, 1)),
              eager(gf.transpose(0, 1), uf.transpose(0, 1), df.transpose(0, 1)), 1e-6,
              "strided float32");
}

INSTANTIATE_TEST_SUITE_P(Isas, SwigluVariant, ::testing::ValuesIn(supported_isas()),
                         testing::isa_test_name);

TEST(SwigluKernel, Float64AndBfloat16MatchTheEagerComposition) {
  const auto in = inputs();
  expect_near(fused(in.g, in.u, in.dout), eager(in.g, in.u, in.dout), 1e-12, "float64");
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  auto gb = bf16(in.g), ub = bf16(in.u), db = bf16(in.dout);
  expect_near(fused(gb, ub, db), eager(gb, ub, db), 1e-2, "bfloat16");
}

TEST(SwigluKernel, RefusesMismatchedInputs) {
  EXPECT_THROW(swiglu(torch::zeros({2, 3}), torch::zeros({3, 2})), c10::Error);
  EXPECT_THROW(swiglu(torch::zeros({2}), torch::zeros({2}, torch::kFloat64)), c10::Error);
}

}  // namespace unit_models_common_kernels_swiglu_test
}  // namespace titan::models::kernels
