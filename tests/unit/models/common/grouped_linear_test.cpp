// The grouped linear layer against one torch::linear per group, in float64: forward and the
// gradients of x and w, with empty groups first, in the middle and last.
#include <gtest/gtest.h>

#include "titan/models/common/grouped_linear.h"

namespace titan::models {
namespace unit_models_common_grouped_linear_test {

TEST(GroupedLinear, MatchesOneLinearPerGroupWithEmptyGroups) {
  torch::manual_seed(7);
  const std::vector<int64_t> counts = {0, 3, 0, 1, 4, 0};
  auto x = torch::randn({8, 5}, torch::kFloat64).requires_grad_(true);
  auto w = torch::randn({6, 4, 5}, torch::kFloat64).requires_grad_(true);
  auto probe = torch::randn({8, 4}, torch::kFloat64);
  (grouped_linear(x, w, counts) * probe).sum().backward();
  auto y = grouped_linear(x, w, counts).detach();
  auto dx = x.grad().clone(), dw = w.grad().clone();

  x.grad().zero_();
  w.grad().zero_();
  std::vector<torch::Tensor> parts;
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    parts.push_back(torch::linear(x.narrow(0, start, counts[e]), w[e]));  // [n_e, 4]
    start += counts[e];
  }
  auto want = torch::cat(parts);  // [8, 4]
  (want * probe).sum().backward();
  EXPECT_LE((y - want.detach()).abs().max().item<double>(), 1e-14);
  EXPECT_LE((dx - x.grad()).abs().max().item<double>(), 1e-14);
  EXPECT_LE((dw - w.grad()).abs().max().item<double>(), 1e-14);
  for (int64_t e : {0, 2, 5}) EXPECT_EQ(dw[e].abs().max().item<double>(), 0.0);
}

}  // namespace unit_models_common_grouped_linear_test
}  // namespace titan::models
