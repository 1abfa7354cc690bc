// Compile mode's MoE routing kernels against the eager layer (models/common/moe_test.cpp holds
// that to a per-token float64 loop): the whole layer with the fused router, counting sort,
// permutation and combine installed against the same layer without them, on the Qwen3-MoE,
// DeepSeek-V3 (sigmoid, groups, bias, shared experts, scale) and score-before-experts
// routings. The same experts chosen, ties included; output and every gradient (input, router,
// experts) in float64 to 1e-12, float32 to 1e-5 relative of float64, bfloat16 to 2e-2 of the
// eager layer in bfloat16. Enough tokens for several tasks of the permutation kernels.
#include "titan/models/common/kernels/moe_routing.h"

#include <gtest/gtest.h>

#include <vector>

#include "../moe_routings.h"
#include "support/relative_error.h"

namespace titan::models::kernels {
namespace unit_models_common_kernels_moe_routing_test {

using titan::testing::max_rel;

void fuse(MoEImpl& moe) {
  moe.router->choose = route;
  moe.moves = {sort_copies, permute_copies, combine_copies};
}

// A layer in `dtype` with the weights of a float64 one; the gate's rows 1 and E - 1 equal, so
// those experts always tie.
MoE make(const MoEArgs& args, int64_t dim, torch::ScalarType dtype, bool fused) {
  torch::manual_seed(3);
  MoE moe(dim, args, torch::TensorOptions().dtype(torch::kFloat64));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : moe->parameters()) p.normal_(0.0, 0.5);
    moe->router->gate->weight[args.num_experts - 1].copy_(moe->router->gate->weight[1]);
    if (moe->expert_bias.defined()) moe->expert_bias.copy_(torch::randn({args.num_experts}) * 0.1);
  }
  moe->to(dtype);
  if (moe->expert_bias.defined()) moe->expert_bias = moe->expert_bias.to(torch::kFloat32);
  if (fused) fuse(*moe);
  return moe;
}

struct Result {
  torch::Tensor experts, out;
  std::vector<torch::Tensor> grads;  // input, then every parameter
};

Result run(const MoEArgs& args, torch::ScalarType dtype, bool fused) {
  const int64_t dim = 24;
  auto moe = make(args, dim, dtype, fused);
  torch::manual_seed(4);
  auto x = torch::randn({4, 400, dim}, torch::kFloat64).to(dtype).requires_grad_();
  auto probe = torch::randn({4, 400, dim}, torch::kFloat64).to(dtype);
  auto y = moe(x);  // [B, S, dim]
  (y * probe).sum().backward();
  Result r{moe->router(x.detach().reshape({-1, dim}), moe->expert_bias).experts, y.detach(),
           {x.grad()}};
  for (const auto& p : moe->parameters()) r.grads.push_back(p.grad());
  return r;
}

void expect_near(const Result& got, const Result& want, double tol, const std::string& what) {
  EXPECT_TRUE(torch::equal(got.experts, want.experts)) << what << ": the experts chosen";
  EXPECT_LE(max_rel(got.out, want.out), tol) << what << ": output";
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    EXPECT_LE(max_rel(got.grads[i], want.grads[i]), tol) << what << ": gradient " << i;
  }
}

void check_every_dtype(const MoEArgs& args, const std::string& name) {
  const auto want = run(args, torch::kFloat64, false);
  expect_near(run(args, torch::kFloat64, true), want, 1e-12, name + " float64");
  expect_near(run(args, torch::kFloat32, true), want, 1e-5, name + " float32");
  expect_near(run(args, torch::kBFloat16, true), run(args, torch::kBFloat16, false), 2e-2,
              name + " bfloat16");
}

TEST(MoERoutingKernel, SoftmaxRoutingMatchesTheEagerLayer) {  // Qwen3-MoE
  check_every_dtype(testing::softmax_routing(), "softmax");
}

TEST(MoERoutingKernel, SigmoidGroupLimitedBiasedRoutingMatchesTheEagerLayer) {  // DeepSeek-V3
  check_every_dtype(testing::sigmoid_group_routing(), "sigmoid, groups");
}

TEST(MoERoutingKernel, ScoreBeforeExpertsMatchesTheEagerLayer) {
  check_every_dtype(testing::score_before_routing(), "score before experts");
}

TEST(MoERoutingKernel, AllScoresEqualGoToTheLowestExperts) {
  const auto a = testing::softmax_routing();  // top 2 of 12, renormalised
  auto r = route(torch::zeros({5, a.num_experts}), torch::Tensor(), a);
  EXPECT_TRUE(torch::equal(r.experts, torch::tensor({0, 1}, torch::kLong).repeat({5, 1})));
  EXPECT_LE((r.gates - 0.5).abs().max().item<double>(), 1e-7);
}

TEST(MoERoutingKernel, SortsCopiesLikeAStableArgsort) {
  torch::manual_seed(5);
  const int64_t E = 7;
  auto experts = torch::randint(E, {50, 3}, torch::kLong);  // repeats in a row are fine here
  auto order = sort_copies(experts, E);
  auto flat = experts.reshape({-1});
  EXPECT_TRUE(torch::equal(order.copy, torch::argsort(flat, /*stable=*/true)));
  EXPECT_TRUE(torch::equal(order.counts, torch::bincount(flat, {}, E)));
  EXPECT_TRUE(torch::equal(order.copy.index_select(0, order.position.reshape({-1})),
                           torch::arange(flat.size(0))));
  EXPECT_THROW(sort_copies(torch::tensor({{0, 7}}, torch::kLong), E), c10::Error);
}

TEST(MoERoutingKernel, NoTokensGiveEmptyResults) {  // an expert-parallel rank with none routed
  auto order = sort_copies(torch::empty({0, 2}, torch::kLong), 4);
  EXPECT_TRUE(torch::equal(order.counts, torch::zeros({4}, torch::kLong)));
  auto tokens = torch::empty({0, 3}).requires_grad_();
  auto gates = torch::empty({0, 2}).requires_grad_();
  auto out = combine_copies(permute_copies(tokens, order, torch::Tensor()), order, gates);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 3}));
  out.sum().backward();
  EXPECT_EQ(tokens.grad().sizes(), tokens.sizes());
  EXPECT_EQ(gates.grad().sizes(), gates.sizes());
}

TEST(MoERoutingKernel, RefusesMismatchedShapes) {
  auto order = sort_copies(torch::tensor({{0, 1}, {1, 2}}, torch::kLong), 3);  // T 2, K 2
  EXPECT_THROW(permute_copies(torch::zeros({3, 4}), order, torch::Tensor()), c10::Error);
  EXPECT_THROW(combine_copies(torch::zeros({2, 4}), order, torch::Tensor()), c10::Error);
  EXPECT_THROW(combine_copies(torch::zeros({4, 4}), order, torch::zeros({2, 2}, torch::kFloat64)),
               c10::Error);
  EXPECT_THROW(route(torch::zeros({2, 3}), torch::Tensor(), testing::score_before_routing()),
               c10::Error);  // 3 logits for 4 experts
}

}  // namespace unit_models_common_kernels_moe_routing_test
}  // namespace titan::models::kernels
