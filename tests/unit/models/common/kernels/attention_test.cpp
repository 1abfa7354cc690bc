// Compile mode's causal attention against the float64 composition softmax(q k^T scale + causal
// mask) v, forward and the three input gradients: float32 to 3e-6 relative (of the largest
// magnitude), bfloat16 to 2e-2 of eager's bfloat16 kernel. Shapes cover partial tiles (S 150
// over 64-row tiles), grouped key/value heads, head widths off the 16-float vectors (Dh 20) and
// MLA's narrower values (Dv 12), and the strided q, k, v the model passes; in every vector
// variant the CPU runs (baseline SSE, AVX2, AVX-512).
#include "titan/models/common/kernels/attention.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/kernel_isa.h"
#include "support/relative_error.h"
#include "titan/models/common/causal_attention.h"

namespace titan::models::kernels {
namespace unit_models_common_kernels_attention_test {

using testing::max_rel;

struct Result {
  torch::Tensor out, dq, dk, dv;
};

template <typename Fn>
Result run(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
           const torch::Tensor& dout, Fn fn) {
  auto q = q_in.clone().requires_grad_(), k = k_in.clone().requires_grad_(),
       v = v_in.clone().requires_grad_();
  auto out = fn(q, k, v);
  out.backward(dout.to(out.scalar_type()));
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

// q [B, H, S, Dh], k [B, Hkv, S, Dh], v [B, Hkv, S, Dv] -> [B, H, S, Dv], all in float64.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        double scale) {
  const int64_t group = q.size(1) / k.size(1), S = q.size(2);
  auto kk = k.repeat_interleave(group, 1), vv = v.repeat_interleave(group, 1);
  auto scores = torch::matmul(q, kk.transpose(-2, -1)) * scale;  // [B, H, S, S]
  auto mask = torch::ones({S, S}, torch::kBool).triu(1);
  return torch::matmul(scores.masked_fill(mask, -INFINITY).softmax(-1), vv);
}

void expect_near(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_LE(max_rel(got.out, want.out), tol) << what << " out";
  EXPECT_LE(max_rel(got.dq, want.dq), tol) << what << " dq";
  EXPECT_LE(max_rel(got.dk, want.dk), tol) << what << " dk";
  EXPECT_LE(max_rel(got.dv, want.dv), tol) << what << " dv";
}

struct Shape {
  int64_t B, H, Hkv, S, Dh, Dv;
};

// q, k, v as the model passes them: [B, S, heads, D] transposed to [B, heads, S, D].
std::vector<torch::Tensor> inputs(const Shape& s) {
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  return {torch::randn({s.B, s.S, s.H, s.Dh}, f64).transpose(1, 2),
          torch::randn({s.B, s.S, s.Hkv, s.Dh}, f64).transpose(1, 2),
          torch::randn({s.B, s.S, s.Hkv, s.Dv}, f64).transpose(1, 2),
          torch::randn({s.B, s.H, s.S, s.Dv}, f64)};
}

// Every variant this CPU runs, each forced in turn.
class AttentionVariant : public testing::EachKernelIsa {};

TEST_P(AttentionVariant, MatchesTheFloat64CompositionOnPartialTilesAndGroupedHeads) {
  torch::manual_seed(3);
  for (const Shape& s : {Shape{2, 4, 2, 150, 20, 20}, Shape{1, 2, 2, 200, 16, 16},
                         Shape{1, 3, 3, 70, 24, 12}, Shape{1, 2, 1, 5, 16, 16},
                         Shape{1, 2, 2, 130, 40, 36}}) {
    const auto in = inputs(s);
    const double scale = 1.0 / std::sqrt(double(s.Dh));
    const auto want = run(in[0], in[1], in[2], in[3], [scale](auto& q, auto& k, auto& v) {
      return reference(q, k, v, scale);
    });
    const auto f32 = [](const torch::Tensor& t) { return t.to(torch::kFloat); };
    const auto got = run(f32(in[0]), f32(in[1]), f32(in[2]), in[3], [scale](auto& q, auto& k, auto& v) {
      return causal_attention(q, k, v, scale);
    });
    const auto what = fmt::format("B {} H {} Hkv {} S {} Dh {} Dv {}", s.B, s.H, s.Hkv, s.S, s.Dh, s.Dv);
    expect_near(got, want, 3e-6, what);
    EXPECT_EQ(got.out.scalar_type(), torch::kFloat) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, AttentionVariant, ::testing::ValuesIn(supported_isas()),
                         testing::isa_test_name);

TEST(AttentionKernel, Bfloat16FollowsTheEagerKernel) {
  torch::manual_seed(4);
  const auto in = inputs({2, 4, 2, 130, 16, 16});
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  const auto eager = run(bf16(in[0]), bf16(in[1]), bf16(in[2]), in[3], [](auto& q, auto& k, auto& v) {
    return models::causal_attention(q, k, v, 0.25);
  });
  const auto fused = run(bf16(in[0]), bf16(in[1]), bf16(in[2]), in[3], [](auto& q, auto& k, auto& v) {
    return causal_attention(q, k, v, 0.25);
  });
  EXPECT_EQ(fused.out.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(fused.dq.scalar_type(), torch::kBFloat16);
  expect_near(fused, eager, 2e-2, "bfloat16");
}

TEST(AttentionKernel, RefusesWhatItDoesNotCompute) {
  const auto t = torch::zeros({1, 2, 8, 16});
  EXPECT_THROW(causal_attention(t.to(torch::kFloat64), t, t, 1.0), c10::Error);
  EXPECT_THROW(causal_attention(t, torch::zeros({1, 3, 8, 16}), torch::zeros({1, 3, 8, 16}), 1.0),
               c10::Error);  // 2 query heads over 3 key/value heads
  EXPECT_THROW(causal_attention(t, torch::zeros({1, 2, 8, 8}), t, 1.0), c10::Error);
}

}  // namespace unit_models_common_kernels_attention_test
}  // namespace titan::models::kernels
