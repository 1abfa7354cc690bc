// AdamW / Adam against a float64 scalar re-derivation of PyTorch's update rule, in both
// implementations (fused and for-loop), with and without a clipping factor on the gradients
// (which both leave applied to the gradients); the two within 1e-6 of each other over 20 steps
// of a larger tensor.
#include "titan/components/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace titan::components {
namespace unit_components_optimizer_test {

// One parameter element through `steps` updates with gradient g_t = grads[t], in float64.
double reference_adam(double p, const std::vector<double>& grads, double lr, AdamOptions o) {
  double m = 0, v = 0;
  for (size_t t = 1; t <= grads.size(); ++t) {
    double g = grads[t - 1];
    if (o.decoupled) {
      p *= 1 - lr * o.weight_decay;
    } else {
      g += o.weight_decay * p;
    }
    m = o.beta1 * m + (1 - o.beta1) * g;
    v = o.beta2 * v + (1 - o.beta2) * g * g;
    double mhat = m / (1 - std::pow(o.beta1, t));
    double vhat = v / (1 - std::pow(o.beta2, t));
    p -= lr * mhat / (std::sqrt(vhat) + o.eps);
  }
  return p;
}

void check(bool decoupled, bool fused, double grad_scale) {
  AdamOptions o;
  o.decoupled = decoupled;
  o.fused = fused;
  auto p = torch::tensor({0.5f, -1.25f, 2.0f}).requires_grad_(true);
  Adam adam({p}, o);
  std::vector<std::vector<double>> grads = {{0.1, -0.3, 0.7}, {0.2, 0.1, -0.5}, {-0.4, 0.0, 0.3}};
  for (size_t t = 0; t < 3; ++t) {
    p.mutable_grad() = torch::tensor({float(grads[0][t]), float(grads[1][t]), float(grads[2][t])});
    adam.step(1e-2, grad_scale);
    EXPECT_NEAR(p.grad()[0].item<double>(), grads[0][t] * grad_scale, 1e-7) << "scaled in place";
  }
  std::vector<double> start = {0.5, -1.25, 2.0};
  for (int i = 0; i < 3; ++i) {
    for (auto& g : grads[i]) g *= grad_scale;
    double want = reference_adam(start[i], grads[i], 1e-2, o);
    EXPECT_NEAR(p[i].item<double>(), want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
  EXPECT_EQ(adam.steps_taken(), 3);
}

TEST(Adam, AdamWMatchesReference) {
  for (bool fused : {true, false}) {
    for (double scale : {1.0, 0.25}) check(true, fused, scale);
  }
}

TEST(Adam, AdamWithL2MatchesReference) {
  for (bool fused : {true, false}) {
    for (double scale : {1.0, 0.25}) check(false, fused, scale);
  }
}

TEST(Adam, FusedAndForLoopAgreeOverManySteps) {
  torch::manual_seed(2);
  auto start = torch::randn({4099});
  std::vector<torch::Tensor> params;
  std::vector<Adam> optimizers;
  for (bool fused : {true, false}) {
    params.push_back(start.clone().requires_grad_(true));
    AdamOptions o;
    o.fused = fused;
    optimizers.emplace_back(std::vector<torch::Tensor>{params.back()}, o);
  }
  for (int t = 0; t < 20; ++t) {
    auto g = torch::randn({4099});
    for (size_t k = 0; k < 2; ++k) {
      params[k].mutable_grad() = g.clone();
      optimizers[k].step(1e-3, t % 2 ? 0.5 : 1.0);
    }
  }
  EXPECT_LE((params[0] - params[1]).abs().max().item<double>(), 1e-6);
}

TEST(Adam, ZeroGradClearsAndSkipsMissingGradients) {
  auto p = torch::ones({2}).requires_grad_(true);
  Adam adam({p}, AdamOptions{});
  adam.step(0.1);  // no gradient: untouched
  EXPECT_TRUE(torch::equal(p, torch::ones({2})));
  p.mutable_grad() = torch::ones({2});
  adam.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

}  // namespace unit_components_optimizer_test
}  // namespace titan::components
