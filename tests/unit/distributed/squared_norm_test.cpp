// The gradient-clipping norm kernel against x.to(kDouble).pow(2).sum(): float32 and bfloat16
// over more elements than one task (the threads' partial sums combined) to 1e-12 relative,
// strided input, float64 exactly representable values exactly, an empty tensor as 0.
#include "titan/distributed/squared_norm.h"

#include <gtest/gtest.h>

namespace titan::distributed {
namespace unit_distributed_squared_norm_test {

double reference(const torch::Tensor& x) {
  return x.to(torch::kDouble).pow(2).sum().item<double>();
}

TEST(SquaredNorm, MatchesTheFloat64SumInEveryDtype) {
  torch::manual_seed(6);
  auto x = torch::randn({300'001});
  for (const auto& t :
       {x, x.to(torch::kBFloat16), x.view({-1}).narrow(0, 1, 200'000).view({-1, 8}).t()}) {
    const double want = reference(t);
    EXPECT_NEAR(squared_norm(t).item<double>(), want, 1e-12 * want) << t.scalar_type();
  }
  EXPECT_EQ(squared_norm(torch::tensor({3.0, 4.0}, torch::kDouble)).item<double>(), 25.0);
  EXPECT_EQ(squared_norm(torch::zeros({0})).item<double>(), 0.0);
  EXPECT_EQ(squared_norm(x).scalar_type(), torch::kDouble);
}

}  // namespace unit_distributed_squared_norm_test
}  // namespace titan::distributed
