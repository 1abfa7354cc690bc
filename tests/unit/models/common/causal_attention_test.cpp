// Causal attention (LibTorch's fused SDPA kernels) against (1) a float64 loop over batch, head,
// query and key and (2) the plain [B, H, S, S] formulation under autograd for gradients, for MHA,
// GQA and MQA head layouts and sequences shorter and longer than the kernel's blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/dense_attention.h"
#include "titan/models/common/causal_attention.h"

namespace titan::models {
namespace unit_models_common_causal_attention_test {

struct Case {
  int64_t heads, kv_heads, seq;
};

// Loop reference: out[b,h,i] = sum_{j<=i} softmax_j(q[b,h,i] . k[b,g,j] * scale) v[b,g,j],
// g = h / (H / Hkv).
torch::Tensor loop_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             double scale) {
  const int64_t B = q.size(0), H = q.size(1), S = q.size(2), Dh = q.size(3);
  const int64_t G = H / k.size(1);
  auto qa = q.accessor<double, 4>();
  auto ka = k.accessor<double, 4>();
  auto va = v.accessor<double, 4>();
  auto out = torch::zeros_like(q);
  auto oa = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / G;
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> s(i + 1);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < Dh; ++d) dot += qa[b][h][i][d] * ka[b][g][j][d];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double z = 0.0;
        for (auto& x : s) z += (x = std::exp(x - m));
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < Dh; ++d) oa[b][h][i][d] += s[j] / z * va[b][g][j][d];
        }
      }
    }
  }
  return out;
}

class CausalAttention : public ::testing::TestWithParam<Case> {};

TEST_P(CausalAttention, MatchesLoopAndDenseGradients) {
  const Case c = GetParam();
  torch::manual_seed(5);
  const int64_t B = 2, S = c.seq, Dh = 8;
  const double scale = 1.0 / std::sqrt(double(Dh));
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto q = torch::randn({B, c.heads, S, Dh}, opts).requires_grad_();
  auto k = torch::randn({B, c.kv_heads, S, Dh}, opts).requires_grad_();
  auto v = torch::randn({B, c.kv_heads, S, Dh}, opts).requires_grad_();
  auto out = causal_attention(q, k, v, scale);
  EXPECT_LE((out - loop_reference(q.detach(), k.detach(), v.detach(), scale)).abs().max().item<double>(),
            1e-13);

  auto upstream = torch::randn_like(out);
  auto grads = torch::autograd::grad({out}, {q, k, v}, {upstream});
  auto dense_grads = torch::autograd::grad({testing::dense_attention(q, k, v, scale)}, {q, k, v}, {upstream});
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE((grads[i] - dense_grads[i]).abs().max().item<double>(), 1e-13) << "input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(HeadLayoutsAndLengths, CausalAttention,
                         ::testing::Values(Case{4, 4, 13}, Case{4, 4, 1}, Case{6, 2, 13},
                                           Case{6, 1, 100}, Case{8, 2, 3}, Case{2, 1, 300}));

TEST(CausalAttentionPrecision, Float32AndBfloat16) {
  torch::manual_seed(6);
  auto q = torch::randn({1, 4, 40, 16}, torch::kFloat64);
  auto k = torch::randn({1, 2, 40, 16}, torch::kFloat64);
  auto v = torch::randn({1, 2, 40, 16}, torch::kFloat64);
  auto want = causal_attention(q, k, v, 0.25);
  auto f32 = causal_attention(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), 0.25);
  EXPECT_EQ(f32.scalar_type(), torch::kFloat32);
  EXPECT_LE((f32.to(torch::kFloat64) - want).abs().max().item<double>(), 1e-5);
  auto bf16 = causal_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16),
                               v.to(torch::kBFloat16), 0.25);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_LE((bf16.to(torch::kFloat64) - want).abs().max().item<double>(), 5e-2);
}

TEST(CausalAttentionPrecision, RejectsUngroupableHeads) {
  auto q = torch::randn({1, 3, 4, 8});
  auto kv = torch::randn({1, 2, 4, 8});
  EXPECT_THROW(causal_attention(q, kv, kv, 1.0), c10::Error);
}

}  // namespace unit_models_common_causal_attention_test
}  // namespace titan::models
