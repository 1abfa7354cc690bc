// A zero-bubble split backward through the deferring ops against one whole backward, in
// float64: the input pass (the stage input's gradient, or for a first stage the parameters no
// op defers) and then the weight pass give every parameter and the input the whole backward's
// gradients (1e-12 relative; the deferred products are the same GEMMs in another order of
// operands), and the weight pass says which parameters came from deferred products (Linear, the
// eager and the fused RMSNorm, the grouped GEMM, the fused loss) and which from walking the
// graph (a parameter an aten op also reads).
#include <gtest/gtest.h>

#include "support/relative_error.h"
#include "titan/distributed/linear_cross_entropy.h"
#include "titan/models/common/grouped_linear.h"
#include "titan/models/common/kernels/rms_norm.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/platform/deferred_weight_grad.h"

namespace titan::platform {
namespace unit_platform_deferred_weight_grad_test {

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

struct Stage {
  torch::Tensor w1 = torch::randn({8, 6}, kF64).requires_grad_(true);      // linear
  torch::Tensor g1 = torch::rand({8}, kF64).add_(0.5).requires_grad_(true);  // fused norm
  torch::Tensor w2 = torch::randn({3, 5, 8}, kF64).requires_grad_(true);   // grouped GEMM
  models::RMSNorm norm{5, 1e-6, kF64};                                     // eager norm
  torch::Tensor wl = torch::randn({10, 5}, kF64).requires_grad_(true);     // fused loss
  torch::Tensor s = torch::randn({5}, kF64).requires_grad_(true);          // an aten multiply
  torch::Tensor labels = torch::tensor({1, 9, 0, 4}, torch::kLong);

  std::vector<torch::Tensor> parameters() {
    return {w1, g1, w2, norm->weight, wl, s};
  }
  // h: [4, 6] -> the summed loss; w1 also read by an aten op when `shared_w1`.
  torch::Tensor loss(const torch::Tensor& h, bool shared_w1) {
    auto a = models::kernels::rms_norm(models::deferrable_linear(h, w1), g1, 1e-6);  // [4, 8]
    auto b = norm(models::grouped_linear(a, w2, {1, 0, 3}) * s);                       // [4, 5]
    auto l = distributed::linear_cross_entropy_sum(b, wl, labels, {});
    return shared_w1 ? l + w1.pow(2).sum() * 0.01 : l;
  }
  void zero() {
    for (auto& p : parameters()) p.mutable_grad() = torch::Tensor();
  }
};

std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.grad().clone());
  return out;
}

void expect_same(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(testing::max_rel(got[i], want[i]), 1e-12) << "parameter " << i;
  }
}

void check_split(bool shared_w1, int want_deferred, int want_walked) {
  torch::manual_seed(3);
  Stage stage;
  auto x = torch::randn({4, 6}, kF64).requires_grad_(true);
  stage.loss(x, shared_w1).backward();
  const auto want = grads_of(stage.parameters());
  const auto want_dx = x.grad().clone();

  stage.zero();
  WeightGradRecorder recorder;
  torch::Tensor loss;
  {
    WeightGradRecorder::Recording recording(recorder);
    loss = stage.loss(x, shared_w1);
  }
  auto dx = torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true)[0];  // I
  for (const auto& p : stage.parameters()) EXPECT_FALSE(p.grad().defined());
  const auto counts = recorder.backward(loss, {}, stage.parameters());          // W
  EXPECT_LE(testing::max_rel(dx, want_dx), 1e-12);
  expect_same(grads_of(stage.parameters()), want);
  EXPECT_EQ(counts.deferred, want_deferred);
  EXPECT_EQ(counts.walked, want_walked);
}

TEST(DeferredWeightGrad, WeightPassComputesOnlyTheDeferredProducts) {
  check_split(/*shared_w1=*/false, /*want_deferred=*/5, /*want_walked=*/1);  // s: aten's
}

TEST(DeferredWeightGrad, ParameterAnAtenOpAlsoReadsIsWalkedWhole) {
  check_split(/*shared_w1=*/true, /*want_deferred=*/4, /*want_walked=*/2);  // s and w1
}

// Two weights out of one node (as FSDP's gather hands out a unit's weights), one read by an aten
// op and one by a deferring Linear: the weight pass folds the Linear into its walk, so the node
// runs once with both gradients, as in a whole backward.
struct Gather : public torch::autograd::Function<Gather> {
  static int backwards;
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext*,
                                                const torch::Tensor& a, const torch::Tensor& b) {
    return {a.clone(), b.clone()};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    ++backwards;
    EXPECT_TRUE(grads[0].defined() && grads[1].defined()) << "a gather's backward in halves";
    return grads;
  }
};
int Gather::backwards = 0;

TEST(DeferredWeightGrad, ANodeSharedWithTheWalkRunsOnceWithAllItsGradients) {
  torch::manual_seed(5);
  auto a = torch::randn({3, 6}, kF64).requires_grad_(true);
  auto b = torch::randn({3, 6}, kF64).requires_grad_(true);
  auto x = torch::randn({4, 6}, kF64).requires_grad_(true);
  const auto loss_of = [&] {
    auto w = Gather::apply(a, b);
    return (torch::matmul(x, w[0].t()) + models::deferrable_linear(x, w[1])).pow(2).sum();
  };
  loss_of().backward();
  const auto want = grads_of({a, b, x});
  a.mutable_grad() = b.mutable_grad() = x.mutable_grad() = torch::Tensor();
  Gather::backwards = 0;

  WeightGradRecorder recorder;
  torch::Tensor loss;
  {
    WeightGradRecorder::Recording recording(recorder);
    loss = loss_of();
  }
  x.mutable_grad() = torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true)[0];
  const auto counts = recorder.backward(loss, {}, {a, b});
  EXPECT_EQ(Gather::backwards, 1);
  EXPECT_EQ(counts.walked, 2);
  EXPECT_EQ(counts.deferred, 0);
  expect_same(grads_of({a, b, x}), want);
}

// A first stage: its input is tokens, so I differentiates the parameters no op defers (here
// the embedding's) and W gives the others theirs.
TEST(DeferredWeightGrad, FirstStageInputPassTakesTheUndeferrableParameters) {
  torch::manual_seed(4);
  Stage stage;
  auto embedding = torch::randn({12, 6}, kF64).requires_grad_(true);
  auto tokens = torch::tensor({3, 11, 0, 3}, torch::kLong);
  auto all = stage.parameters();
  all.push_back(embedding);
  stage.loss(torch::embedding(embedding, tokens), false).backward();
  const auto want = grads_of(all);

  stage.zero();
  embedding.mutable_grad() = torch::Tensor();
  WeightGradRecorder recorder;
  torch::Tensor loss;
  {
    WeightGradRecorder::Recording recording(recorder);
    loss = stage.loss(torch::embedding(embedding, tokens), false);
  }
  const auto first = recorder.undeferrable(loss, all);
  ASSERT_EQ(first.size(), 2u);  // s and the embedding
  EXPECT_TRUE(first[0].is_same(stage.s));
  EXPECT_TRUE(first[1].is_same(embedding));
  torch::autograd::backward({loss}, {}, /*retain_graph=*/true, false, first);
  const auto counts = recorder.backward(
      loss, {}, {stage.w1, stage.g1, stage.w2, stage.norm->weight, stage.wl});  // not I's
  EXPECT_EQ(counts.deferred, 5);
  EXPECT_EQ(counts.walked, 0);
  expect_same(grads_of(all), want);
}

}  // namespace unit_platform_deferred_weight_grad_test
}  // namespace titan::platform
