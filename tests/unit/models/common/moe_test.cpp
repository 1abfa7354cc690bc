// The mixture-of-experts layer against a per-token float64 loop: the routing decided by plain
// loops over doubles (scores, bias, group limits, ties to the lower index), then each token's
// output as the gate-weighted sum of its experts, computed token by token so autograd gives the
// reference gradients. Forward and every gradient to 1e-9 (both float64).
#include "titan/models/common/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "moe_routings.h"
#include "titan/errors.h"

namespace titan::models {
namespace unit_models_common_moe_test {

constexpr double kTol = 1e-9;

std::vector<double> row(const torch::Tensor& t) {  // [n] float64 -> values
  auto c = t.detach().contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// Indices of `v` by value, largest first, equal values in index order.
std::vector<int64_t> ranked(const std::vector<double>& v) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
  return idx;
}

// The k experts token `x` goes to, by loops.
std::vector<int64_t> reference_choice(const MoEImpl& moe, const std::vector<double>& x) {
  const auto& a = moe.args;
  const auto gate = moe.router->gate->weight.detach();  // [E, dim]
  std::vector<double> choice(a.num_experts);
  std::vector<double> logits(a.num_experts);
  for (int64_t e = 0; e < a.num_experts; ++e) {
    auto w = row(gate[e]);
    logits[e] = std::inner_product(w.begin(), w.end(), x.begin(), 0.0);
  }
  const double top = *std::max_element(logits.begin(), logits.end());
  double denom = 0.0;
  for (double l : logits) denom += std::exp(l - top);
  for (int64_t e = 0; e < a.num_experts; ++e) {
    choice[e] = a.score_func == MoEArgs::ScoreFunc::Softmax ? std::exp(logits[e] - top) / denom
                                                            : 1.0 / (1.0 + std::exp(-logits[e]));
    if (moe.expert_bias.defined()) choice[e] += moe.expert_bias[e].item<double>();
  }
  if (a.num_expert_groups > 0) {
    const int64_t per = a.num_experts / a.num_expert_groups;
    std::vector<double> group_score(a.num_expert_groups);
    for (int64_t g = 0; g < a.num_expert_groups; ++g) {
      std::vector<double> members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(members.rbegin(), members.rend());
      group_score[g] = members[0] + members[1];
    }
    auto groups = ranked(group_score);
    for (int64_t r = a.num_limited_groups; r < a.num_expert_groups; ++r) {
      for (int64_t e = 0; e < per; ++e) choice[groups[r] * per + e] = -INFINITY;
    }
  }
  auto order = ranked(choice);
  return {order.begin(), order.begin() + a.top_k};
}

torch::Tensor swiglu(const torch::Tensor& w1, const torch::Tensor& w2, const torch::Tensor& w3,
                     const torch::Tensor& x) {  // x: [dim] -> [dim]
  return torch::mv(w2, torch::silu(torch::mv(w1, x)) * torch::mv(w3, x));
}

struct Reference {
  torch::Tensor out;                         // [T, dim]
  std::vector<std::vector<int64_t>> chosen;  // per token
};

// x: [T, dim] -> the layer's output token by token, with autograd to x and the parameters.
Reference reference_forward(MoEImpl& moe, const torch::Tensor& x) {
  const auto& a = moe.args;
  Reference ref;
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto xt = x[t];  // [dim]
    auto chosen = reference_choice(moe, row(xt));
    auto logits = torch::mv(moe.router->gate->weight, xt);  // [E]
    auto scores = a.score_func == MoEArgs::ScoreFunc::Softmax ? torch::softmax(logits, 0)
                                                              : torch::sigmoid(logits);
    std::vector<torch::Tensor> gates;
    for (auto e : chosen) gates.push_back(scores[e]);
    auto g = torch::stack(gates);  // [K]
    if (a.route_norm) g = g / (g.sum() + 1e-20);
    g = g * a.route_scale;
    auto y = torch::zeros_like(xt);
    for (int64_t j = 0; j < a.top_k; ++j) {
      const auto e = chosen[j];
      const auto& ex = *moe.experts;
      y = a.score_before_experts
              ? y + swiglu(ex.w1->weight[e], ex.w2->weight[e], ex.w3->weight[e], xt * g[j])
              : y + g[j] * swiglu(ex.w1->weight[e], ex.w2->weight[e], ex.w3->weight[e], xt);
    }
    if (moe.shared_experts) {
      const auto& s = *moe.shared_experts;
      y = y + swiglu(s.w1->weight, s.w2->weight, s.w3->weight, xt);
    }
    outs.push_back(y);
    ref.chosen.push_back(chosen);
  }
  ref.out = torch::stack(outs);
  return ref;
}

MoE make_moe(const MoEArgs& args, int64_t dim, uint64_t seed) {
  torch::manual_seed(seed);
  MoE moe(dim, args, torch::TensorOptions().dtype(torch::kFloat64));
  torch::NoGradGuard no_grad;
  for (auto& p : moe->parameters()) p.normal_(0.0, 0.5);
  if (moe->expert_bias.defined()) moe->expert_bias.copy_(torch::randn({args.num_experts}) * 0.1);
  return moe;
}

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Runs the layer and the loop on the same tokens and compares outputs, routing and gradients;
// returns the tokens each expert received.
std::vector<int64_t> check_against_loop(MoE& moe, int64_t batch, int64_t seq) {
  const int64_t dim = moe->dim;
  moe->zero_grad();
  auto x = torch::randn({batch, seq, dim}, torch::kFloat64).requires_grad_(true);
  auto probe = torch::randn({batch, seq, dim}, torch::kFloat64);
  auto y = moe(x);  // [B, S, dim]
  (y * probe).sum().backward();
  std::vector<torch::Tensor> grads = {x.grad().clone()};
  for (auto& p : moe->parameters()) grads.push_back(p.grad().clone());
  auto routing = moe->router(x.detach().reshape({-1, dim}), moe->expert_bias);

  moe->zero_grad();
  auto x_ref = x.detach().clone().requires_grad_(true);
  auto ref = reference_forward(*moe, x_ref.view({-1, dim}));
  (ref.out.view({batch, seq, dim}) * probe).sum().backward();
  std::vector<torch::Tensor> ref_grads = {x_ref.grad()};
  for (auto& p : moe->parameters()) ref_grads.push_back(p.grad());

  EXPECT_LE(max_abs(y.detach().view({-1, dim}), ref.out.detach()), kTol);
  std::vector<int64_t> tokens_of(moe->args.num_experts, 0);
  for (int64_t t = 0; t < batch * seq; ++t) {
    for (int64_t j = 0; j < moe->args.top_k; ++j) {
      EXPECT_EQ(routing.experts[t][j].item<int64_t>(), ref.chosen[t][j]) << "token " << t;
      ++tokens_of[ref.chosen[t][j]];
    }
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_LE(max_abs(grads[i], ref_grads[i]), kTol) << "gradient " << i;
  }
  return tokens_of;
}

TEST(MoE, SoftmaxTopKWithSharedExpertsMatchesTheLoop) {  // Qwen3-MoE / DeepSeek debug style
  const auto a = testing::softmax_routing();
  auto moe = make_moe(a, 8, 1);
  check_against_loop(moe, 2, 7);
  auto tokens_of = check_against_loop(moe, 2, 2);  // 8 copies for 12 experts: some idle
  EXPECT_EQ(std::accumulate(tokens_of.begin(), tokens_of.end(), int64_t{0}), 2 * 2 * 2);
  int64_t idle = 0;
  for (int64_t e = 0; e < a.num_experts; ++e) {
    if (tokens_of[e] > 0) continue;
    ++idle;
    for (const auto& w : {moe->experts->w1, moe->experts->w2, moe->experts->w3}) {
      EXPECT_EQ(w->weight.grad()[e].abs().max().item<double>(), 0.0) << "expert " << e;
    }
  }
  EXPECT_GE(idle, 4);
}

TEST(MoE, SigmoidGroupLimitedBiasedRoutingMatchesTheLoop) {  // DeepSeek-V3 style
  const auto a = testing::sigmoid_group_routing();
  auto moe = make_moe(a, 6, 2);
  check_against_loop(moe, 3, 5);
}

TEST(MoE, ScoreBeforeExpertsMatchesTheLoop) {
  const auto a = testing::score_before_routing();
  auto moe = make_moe(a, 5, 3);
  check_against_loop(moe, 1, 9);
}

TEST(MoE, TiesGoToTheLowerExpertAndIdleExpertsGetNoGradient) {
  MoEArgs a;
  a.num_experts = 6;
  a.hidden_dim = 3;
  a.top_k = 2;
  a.load_balance_coeff = 0.0;
  auto moe = make_moe(a, 4, 4);
  {
    torch::NoGradGuard no_grad;
    moe->router->gate->weight.zero_();  // every score equal
  }
  auto tokens_of = check_against_loop(moe, 2, 6);
  EXPECT_EQ(tokens_of, (std::vector<int64_t>{12, 12, 0, 0, 0, 0}));
  for (int64_t e = 2; e < 6; ++e) {
    EXPECT_EQ(moe->experts->w2->weight.grad()[e].abs().max().item<double>(), 0.0);
  }
  // A bias breaks the tie its way: experts 3 and 5 ahead of the rest, in index order on ties.
  moe = make_moe(
      [&] {
        auto b = a;
        b.load_balance_coeff = 1e-3;
        return b;
      }(),
      4, 4);
  {
    torch::NoGradGuard no_grad;
    moe->router->gate->weight.zero_();
    moe->expert_bias.copy_(torch::tensor({0.0, 0.0, 0.0, 0.5, 0.0, 0.5}));
  }
  EXPECT_EQ(check_against_loop(moe, 1, 3), (std::vector<int64_t>{0, 0, 0, 3, 0, 3}));
}

TEST(MoE, CountsTokensPerExpertOnlyInTraining) {
  MoEArgs a;
  a.num_experts = 4;
  a.hidden_dim = 3;
  a.top_k = 2;
  auto moe = make_moe(a, 5, 5);
  auto x = torch::randn({2, 3, 5}, torch::kFloat64);
  moe->train();
  moe(x);
  EXPECT_EQ(moe->tokens_per_expert.sum().item<double>(), 2 * 3 * 2);
  auto routing = moe->router(x.view({-1, 5}), moe->expert_bias);
  auto want = torch::bincount(routing.experts.reshape(-1), {}, 4).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(moe->tokens_per_expert, want));
  moe->eval();
  moe(x);
  EXPECT_TRUE(torch::equal(moe->tokens_per_expert, want));
}

TEST(MoE, ActiveParametersCountTowardFlops) {
  MoEArgs a;
  a.num_experts = 8;
  a.hidden_dim = 16;
  a.top_k = 2;
  a.num_shared_experts = 1;
  MoE moe(32, a, torch::TensorOptions().device(torch::kMeta));
  const int64_t router = 8 * 32, expert = 3 * 32 * 16, shared = 3 * 32 * 16;
  EXPECT_EQ(moe->flops_per_token(64), 6 * (router + 2 * expert + shared));
}

TEST(MoE, RefusesArgumentsThatCannotRoute) {
  auto refused = [](auto change) {
    MoEArgs a;
    a.num_experts = 8;
    a.hidden_dim = 4;
    a.top_k = 2;
    change(a);
    EXPECT_THROW(validate(a), ConfigError);
  };
  refused([](MoEArgs& a) { a.top_k = 9; });
  refused([](MoEArgs& a) {
    a.num_expert_groups = 3;
    a.num_limited_groups = 1;
  });
  refused([](MoEArgs& a) {
    a.num_expert_groups = 8;
    a.num_limited_groups = 1;
  });
  refused([](MoEArgs& a) {
    a.num_expert_groups = 4;
    a.num_limited_groups = 5;
  });
  refused([](MoEArgs& a) {
    a.top_k = 5;
    a.num_expert_groups = 4;
    a.num_limited_groups = 2;
  });
  refused([](MoEArgs& a) { a.num_limited_groups = 1; });
  refused([](MoEArgs& a) { a.hidden_dim = 0; });
}

}  // namespace unit_models_common_moe_test
}  // namespace titan::models
