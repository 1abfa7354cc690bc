// RMSNorm against a float64 loop: y_i = x_i / sqrt(mean_j x_j^2 + eps) * w_i.
#include <gtest/gtest.h>

#include <cmath>

#include "titan/models/common/rmsnorm.h"

namespace titan::models {
namespace unit_models_common_rmsnorm_test {

torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xa = x.to(torch::kFloat64).contiguous();
  auto out = torch::empty_like(xa);
  auto rows = xa.view({-1, xa.size(-1)});
  auto orows = out.view({-1, xa.size(-1)});
  const int64_t d = xa.size(-1);
  for (int64_t r = 0; r < rows.size(0); ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; ++i) ss += rows[r][i].item<double>() * rows[r][i].item<double>();
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      orows[r][i].fill_(rows[r][i].item<double>() * inv * w[i].item<double>());
    }
  }
  return out;
}

TEST(RMSNorm, MatchesLoopInFloat64) {
  torch::manual_seed(1);
  RMSNorm norm(16, 1e-5, torch::TensorOptions().dtype(torch::kFloat64));
  {
    torch::NoGradGuard g;
    norm->weight.copy_(1.0 + 0.1 * torch::randn({16}, torch::kFloat64));
  }
  auto x = torch::randn({2, 3, 16}, torch::kFloat64);
  auto err = (norm(x) - reference(x, norm->weight, 1e-5)).abs().max().item<double>();
  EXPECT_LE(err, 1e-13);
}

TEST(RMSNorm, Float32WithinRounding) {
  torch::manual_seed(2);
  RMSNorm norm(32, 1e-6, torch::TensorOptions());
  auto x = torch::randn({4, 32});
  auto y = norm(x);
  EXPECT_EQ(y.scalar_type(), torch::kFloat32);
  EXPECT_LE((y.to(torch::kFloat64) - reference(x, norm->weight, 1e-6)).abs().max().item<double>(),
            1e-5);
}

TEST(RMSNorm, Bfloat16InputKeepsItsDtype) {
  RMSNorm norm(8, 1e-5, torch::TensorOptions());
  auto x = torch::randn({2, 8}).to(torch::kBFloat16);
  auto y = norm(x);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_LE((y.to(torch::kFloat64) - reference(x, norm->weight, 1e-5)).abs().max().item<double>(),
            2e-2);
}

TEST(RMSNorm, StartsAtOnesAndInitialisesToOnes) {
  RMSNorm norm(4, 1e-5, torch::TensorOptions());
  EXPECT_TRUE(torch::equal(norm->weight, torch::ones({4})));
  {
    torch::NoGradGuard g;
    norm->weight.fill_(3.0);
  }
  init_rows(norm->weight, 0, "norm.weight", norm->init, 0);
  EXPECT_TRUE(torch::equal(norm->weight, torch::ones({4})));
}

}  // namespace unit_models_common_rmsnorm_test
}  // namespace titan::models
