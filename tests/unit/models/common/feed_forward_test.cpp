// SwiGLU against a float64 loop over hidden units, and TorchTitan's hidden-size rule.
#include <gtest/gtest.h>

#include <cmath>

#include "titan/models/common/feed_forward.h"

namespace titan::models {
namespace unit_models_common_feed_forward_test {

TEST(FeedForward, MatchesLoopInFloat64) {
  torch::manual_seed(4);
  const int64_t dim = 6, hidden = 10;
  FeedForward ffn(dim, hidden, torch::TensorOptions().dtype(torch::kFloat64));
  {
    torch::NoGradGuard g;
    for (auto& p : ffn->parameters()) p.normal_(0.0, 0.3);
  }
  auto x = torch::randn({2, 3, dim}, torch::kFloat64);
  auto y = ffn(x);
  auto w1 = ffn->w1->weight, w2 = ffn->w2->weight, w3 = ffn->w3->weight;
  double err = 0.0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t s = 0; s < 3; ++s) {
      std::vector<double> act(hidden);
      for (int64_t h = 0; h < hidden; ++h) {
        double g = 0.0, u = 0.0;
        for (int64_t i = 0; i < dim; ++i) {
          g += w1[h][i].item<double>() * x[b][s][i].item<double>();
          u += w3[h][i].item<double>() * x[b][s][i].item<double>();
        }
        act[h] = g / (1.0 + std::exp(-g)) * u;
      }
      for (int64_t o = 0; o < dim; ++o) {
        double want = 0.0;
        for (int64_t h = 0; h < hidden; ++h) want += w2[o][h].item<double>() * act[h];
        err = std::max(err, std::abs(y[b][s][o].item<double>() - want));
      }
    }
  }
  EXPECT_LE(err, 1e-14);
}

TEST(FeedForward, HiddenDimRuleOfTorchTitan) {
  EXPECT_EQ(ffn_hidden_dim(256, 256, std::nullopt), 768);  // llama3 debugmodel
  EXPECT_EQ(ffn_hidden_dim(2048, 256, 1.5), 8192);         // Llama 3.2 1B
  EXPECT_EQ(ffn_hidden_dim(3072, 256, 1.0), 8192);         // Llama 3.2 3B
  EXPECT_EQ(ffn_hidden_dim(4096, 1024, 1.3), 14336);       // Llama 3.1 8B
  EXPECT_EQ(ffn_hidden_dim(8192, 4096, 1.3), 28672);       // Llama 3.1 70B
  EXPECT_EQ(ffn_hidden_dim(16384, 4096, 1.2), 53248);      // Llama 3.1 405B
}

}  // namespace unit_models_common_feed_forward_test
}  // namespace titan::models
