// Expert parallelism's dispatch and combine against the single-rank MoE layer: 2 and 4 ranks as
// threads, each routing its own number of tokens (uneven all-to-all splits), with two experts
// biased out of every top-k (empty splits) and one rank sending nothing at all. Every rank's
// output and input gradient must match the rows one MoE computes over all ranks' tokens, each
// rank's local experts' weight gradients the matching slice of the whole gradient, and the
// router's and shared experts' gradients (partial per rank) must sum to the whole. float64, so
// only summation order differs: 1e-10. Whole models route every token as one rank does.
#include "titan/distributed/expert_parallel.h"

#include <gtest/gtest.h>

#include <numeric>

#include "../models/hf_parity.h"
#include "support/thread_ranks.h"
#include "titan/errors.h"

namespace titan {
namespace unit_distributed_expert_parallel_test {

using models::MoE;
using models::MoEArgs;

constexpr int64_t kDim = 8, kExperts = 8;
constexpr double kTol = 1e-10;

MoE make_moe() {
  MoEArgs args;
  args.num_experts = kExperts;
  args.hidden_dim = 6;
  args.num_shared_experts = 1;
  args.top_k = 2;
  args.score_func = MoEArgs::ScoreFunc::Sigmoid;
  args.route_norm = true;
  return MoE(kDim, args, torch::kFloat64);
}

// The reference's parameters and bias, copied into `moe` (same registration order).
void copy_state(const MoE& from, MoE& to) {
  torch::NoGradGuard no_grad;
  auto src = from->parameters(), dst = to->parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  to->expert_bias.copy_(from->expert_bias);
}

// Rank r's tokens: [1, tokens[r], dim] rows of the whole input, in rank order.
std::vector<int64_t> offsets(const std::vector<int64_t>& tokens) {
  std::vector<int64_t> out(tokens.size(), 0);
  std::partial_sum(tokens.begin(), tokens.end() - 1, out.begin() + 1);
  return out;
}

void expect_near(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  if (got.numel() == 0) return;  // a rank without tokens
  EXPECT_LE((got - want).abs().max().item<double>(), kTol) << what;
}

void check_dispatch(const std::vector<int64_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  torch::manual_seed(3);
  auto reference = make_moe();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : reference->parameters()) p.normal_(0.0, 0.5);
    reference->expert_bias.index_put_({torch::tensor({2, 5})}, -10.0);  // never chosen
  }
  auto x = torch::randn({1, total, kDim}, torch::kFloat64).requires_grad_();
  auto upstream = torch::randn({1, total, kDim}, torch::kFloat64);
  (reference(x) * upstream).sum().backward();
  auto want_out = reference(x).detach();
  const auto starts = offsets(tokens);

  std::vector<std::vector<torch::Tensor>> rank_grads(n);  // every parameter's gradient per rank
  testing::run_thread_ranks(n, [&](int rank, distributed::World& world) {
    auto moe = make_moe();
    copy_state(reference, moe);
    distributed::shard_experts(*moe, world.global());
    auto mine = x.detach().narrow(1, starts[rank], tokens[rank]).clone().requires_grad_();
    auto out = moe(mine);  // [1, tokens[rank], dim]
    (out * upstream.narrow(1, starts[rank], tokens[rank])).sum().backward();
    const std::string at = "rank " + std::to_string(rank) + " of " + std::to_string(n);
    expect_near(out.detach(), want_out.narrow(1, starts[rank], tokens[rank]), at + " output");
    expect_near(mine.grad(), x.grad().narrow(1, starts[rank], tokens[rank]), at + " input grad");
    const int64_t local = kExperts / n;
    for (const char* w : {"w1", "w2", "w3"}) {
      const std::string name = std::string("experts.") + w + ".weight";
      auto got = moe->named_parameters()[name].grad();
      auto whole = reference->named_parameters()[name].grad();
      expect_near(got, whole.narrow(0, rank * local, local), at + " " + name + " grad");
    }
    for (const auto& p : moe->parameters()) rank_grads[rank].push_back(p.grad().clone());
  });
  auto names = reference->named_parameters().keys();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind("experts.", 0) == 0) continue;
    auto summed = torch::zeros_like(rank_grads[0][i]);
    for (int r = 0; r < n; ++r) summed += rank_grads[r][i];
    expect_near(summed, reference->named_parameters()[names[i]].grad(), names[i] + " grad sum");
  }
}

TEST(ExpertParallel, DispatchAndCombineMatchOneRankOnTwoRanks) { check_dispatch({5, 11}); }

TEST(ExpertParallel, DispatchAndCombineMatchOneRankOnFourRanks) {
  check_dispatch({7, 0, 3, 12});  // rank 1 routes no token: it only computes for the others
}

// Whole models with their experts split over 2 thread ranks (../shared's qwen3_moe_tiny and
// deepseek_v3_tiny in float64), each rank reading its own prompt: every token of every MoE layer
// goes to the same experts with the same gates as in the one-rank model, and the logits agree.
void check_routing(const std::string& name) {
  const auto ids = testing::json_ids(testing::load_expected(name)["prompt"]["input_ids"]);
  const std::vector<std::vector<int64_t>> prompts{
      ids, std::vector<int64_t>(ids.rbegin(), ids.rbegin() + ids.size() / 2)};
  auto reference = testing::load_hf_model(name, torch::kFloat64);
  reference->eval();
  testing::run_thread_ranks(2, [&](int rank, distributed::World& world) {
    auto model = testing::load_hf_model(name, torch::kFloat64);
    model->eval();
    distributed::ExpertParallel ep(*model, world.global());
    const auto& prompt = prompts[rank];
    auto got = testing::routing_of(dynamic_cast<models::Transformer&>(*model), prompt);
    auto want = testing::routing_of(dynamic_cast<models::Transformer&>(*reference), prompt);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [layer, routing] : want) {
      const std::string at = name + " rank " + std::to_string(rank) + " layer " + layer;
      EXPECT_TRUE(torch::equal(got[layer].experts, routing.experts)) << at << ": experts";
      expect_near(got[layer].gates, routing.gates, at + ": gates");
    }
    torch::NoGradGuard no_grad;
    auto input = torch::tensor(prompt, torch::kInt64).unsqueeze(0);  // [1, T]
    expect_near(model->forward(input), reference->forward(input), name + " logits");
  });
}

TEST(ExpertParallel, WholeModelsRouteEveryTokenAsOneRankDoes) {
  check_routing("qwen3_moe_tiny");
  check_routing("deepseek_v3_tiny");
}

TEST(ExpertParallel, RefusesExpertsNotDivisibleByTheDegree) {
  testing::run_thread_ranks(3, [](int, distributed::World& world) {
    auto moe = make_moe();
    EXPECT_THROW(distributed::shard_experts(*moe, world.global()), ConfigError);
  });
}

}  // namespace unit_distributed_expert_parallel_test
}  // namespace titan
