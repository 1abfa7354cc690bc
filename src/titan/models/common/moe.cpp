#include "titan/models/common/moe.h"

#include <fmt/format.h>

#include <limits>

#include "titan/errors.h"
#include "titan/models/common/grouped_linear.h"
#include "titan/models/common/recompute.h"

namespace titan::models {
namespace {

constexpr double kRouteNormEps = 1e-20;

// The k largest entries of each row of `choice` [T, E]: their indices [T, K], best first; equal
// values in index order (a stable sort, where topk's order of ties is unspecified).
torch::Tensor top_k_indices(const torch::Tensor& choice, int64_t k) {
  auto order = std::get<1>(torch::sort(choice, /*stable=*/true, /*dim=*/-1, /*descending=*/true));
  return order.narrow(-1, 0, k);  // [T, K]
}

// Group-limited routing: `choice` [T, E] with the experts of all but the num_limited_groups best
// groups (by the sum of their two best scores) set to -inf.
torch::Tensor limit_to_groups(const torch::Tensor& choice, const MoEArgs& a) {
  const int64_t tokens = choice.size(0);
  auto grouped = choice.view({tokens, a.num_expert_groups, -1});         // [T, G, E / G]
  auto group_scores = std::get<0>(grouped.topk(2, /*dim=*/-1)).sum(-1);  // [T, G]
  auto kept = top_k_indices(group_scores, a.num_limited_groups);         // [T, Gl]
  auto dropped = torch::ones_like(group_scores, torch::kBool).scatter_(1, kept, false);  // [T, G]
  return grouped.masked_fill(dropped.unsqueeze(-1), -std::numeric_limits<double>::infinity())
      .view({tokens, -1});  // [T, E]
}

void require_moe(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("mixture-of-experts arguments: " + what);
}

}  // namespace

void validate(const MoEArgs& a) {
  require_moe(a.num_experts > 0,
              fmt::format("num_experts must be positive, got {}", a.num_experts));
  require_moe(a.hidden_dim > 0, fmt::format("hidden_dim must be positive, got {}", a.hidden_dim));
  require_moe(a.num_shared_experts >= 0,
              fmt::format("num_shared_experts must be >= 0, got {}", a.num_shared_experts));
  require_moe(a.top_k >= 1 && a.top_k <= a.num_experts,
              fmt::format("top_k ({}) must be in [1, num_experts = {}]", a.top_k, a.num_experts));
  require_moe(a.load_balance_coeff >= 0.0,
              fmt::format("load_balance_coeff must be >= 0, got {}", a.load_balance_coeff));
  if (a.num_expert_groups == 0) {
    require_moe(a.num_limited_groups == 0, "num_limited_groups is set without num_expert_groups");
    return;
  }
  require_moe(a.num_expert_groups > 0 && a.num_experts % a.num_expert_groups == 0,
              fmt::format("num_expert_groups ({}) must divide num_experts ({})",
                          a.num_expert_groups, a.num_experts));
  const int64_t per_group = a.num_experts / a.num_expert_groups;
  require_moe(per_group >= 2,
              fmt::format("each expert group needs at least 2 experts, got {}", per_group));
  require_moe(a.num_limited_groups >= 1 && a.num_limited_groups <= a.num_expert_groups,
              fmt::format("num_limited_groups ({}) must be in [1, num_expert_groups = {}]",
                          a.num_limited_groups, a.num_expert_groups));
  require_moe(a.num_limited_groups * per_group >= a.top_k,
              fmt::format("num_limited_groups ({}) x experts per group ({}) must be >= top_k ({})",
                          a.num_limited_groups, per_group, a.top_k));
}

TokenChoiceRouterImpl::TokenChoiceRouterImpl(int64_t dim, const MoEArgs& args,
                                             const torch::TensorOptions& options)
    : args(args), gate(register_module("gate", Linear(dim, args.num_experts, options))) {}

Routing TokenChoiceRouterImpl::forward(const torch::Tensor& x, const torch::Tensor& expert_bias) {
  const auto dtype = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto logits = torch::linear(x.to(dtype), gate->weight.to(dtype));  // [T, E]
  Routing r;
  r.scores = args.score_func == MoEArgs::ScoreFunc::Softmax ? torch::softmax(logits, -1)
                                                            : torch::sigmoid(logits);  // [T, E]
  {
    torch::NoGradGuard no_grad;
    auto choice = expert_bias.defined() ? r.scores + expert_bias.to(dtype) : r.scores;  // [T, E]
    if (args.num_expert_groups > 0) choice = limit_to_groups(choice, args);
    r.experts = top_k_indices(choice, args.top_k);  // [T, K]
  }
  r.gates = r.scores.gather(1, r.experts);  // [T, K]
  if (args.route_norm) r.gates = r.gates / (r.gates.sum(-1, /*keepdim=*/true) + kRouteNormEps);
  if (args.route_scale != 1.0) r.gates = r.gates * args.route_scale;
  return r;
}

ExpertWeightImpl::ExpertWeightImpl(int64_t experts, int64_t rows, int64_t cols,
                                   const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({experts, rows, cols}, options));
}

GroupedExpertsImpl::GroupedExpertsImpl(int64_t dim, int64_t hidden_dim, int64_t num_experts,
                                       const torch::TensorOptions& options)
    : num_experts(num_experts),
      hidden_dim(hidden_dim),
      w1(register_module("w1", ExpertWeight(num_experts, hidden_dim, dim, options))),
      w2(register_module("w2", ExpertWeight(num_experts, dim, hidden_dim, options))),
      w3(register_module("w3", ExpertWeight(num_experts, hidden_dim, dim, options))) {}

torch::Tensor GroupedExpertsImpl::forward(const torch::Tensor& x,
                                          const std::vector<int64_t>& counts) {
  auto hidden = gate({grouped_linear(x, w1->weight, counts), grouped_linear(x, w3->weight, counts)},
                     [](const std::vector<torch::Tensor>& in) {
                       return torch::silu(in[0]) * in[1];  // [N, hidden]
                     });
  return grouped_linear(hidden, w2->weight, counts);  // [N, dim]
}

MoEImpl::MoEImpl(int64_t dim, const MoEArgs& moe_args, const torch::TensorOptions& options)
    : dim(dim), args(moe_args) {
  validate(args);
  router = register_module("router", TokenChoiceRouter(dim, args, options));
  experts =
      register_module("experts", GroupedExperts(dim, args.hidden_dim, args.num_experts, options));
  if (args.num_shared_experts > 0) {
    shared_experts = register_module(
        "shared_experts", FeedForward(dim, args.hidden_dim * args.num_shared_experts, options));
  }
  if (args.load_balance_coeff > 0.0) {
    expert_bias = register_buffer("expert_bias",
                                  torch::zeros({args.num_experts}, options.dtype(torch::kFloat32)));
  }
}

torch::Tensor MoEImpl::forward(const torch::Tensor& x) {
  auto tokens = x.reshape({-1, dim});  // tokens: [T, dim]
  const int64_t k = args.top_k;
  auto routing = router(tokens, expert_bias);
  auto chosen = routing.experts.reshape({-1});                  // [N = T K], token-major
  auto by_expert = torch::argsort(chosen, /*stable=*/true);     // [N]: the copies sorted by expert
  auto counts = torch::bincount(chosen, {}, args.num_experts);  // [E]
  if (is_training() && !is_recomputing()) {
    torch::NoGradGuard no_grad;
    if (!tokens_per_expert.defined()) {
      tokens_per_expert = torch::zeros({args.num_experts}, counts.options().dtype(torch::kFloat32));
    }
    tokens_per_expert.add_(counts);
  }
  auto routed = tokens.index_select(0, by_expert.div(k, "floor"));  // routed: [N, dim]
  if (args.score_before_experts) {
    auto gates = routing.gates.reshape({-1}).index_select(0, by_expert);  // [N]
    routed = (routed.to(gates.scalar_type()) * gates.unsqueeze(1)).to(x.scalar_type());
  }
  auto counts_cpu = counts.cpu();
  const auto* n = counts_cpu.data_ptr<int64_t>();
  std::vector<int64_t> expert_counts(n, n + args.num_experts);
  torch::Tensor expert_out, shared;  // expert_out: [N, dim]; shared: [B, S, dim]
  const auto compute_shared = [&] {
    if (shared_experts) shared = shared_experts(x);
  };
  if (dispatcher) {
    auto [local_rows, local_counts] =
        dispatcher->dispatch(routed, expert_counts, compute_shared);  // [M, dim]
    expert_out = dispatcher->combine(experts(local_rows, local_counts));
  } else {
    expert_out = experts(routed, expert_counts);
  }
  auto position = torch::empty_like(by_expert).scatter_(
      0, by_expert, torch::arange(by_expert.size(0), by_expert.options()));  // [N]
  auto per_copy = expert_out.index_select(0, position).view({-1, k, dim});   // [T, K, dim]
  auto out = args.score_before_experts
                 ? per_copy.sum(1)
                 : (per_copy.to(routing.gates.scalar_type()) * routing.gates.unsqueeze(-1))
                       .sum(1)
                       .to(x.scalar_type());  // out: [T, dim]
  out = out.view(x.sizes());                  // [B, S, dim]
  if (!shared_experts) return out;
  if (!dispatcher) compute_shared();  // last, as before expert parallelism (the same sums)
  return out + shared;
}

SavedElements MoEImpl::saved_elements(bool op_level) const {
  const int64_t per_copy = 2 * dim + (op_level ? 2 : 4) * args.hidden_dim;
  const int64_t shared = shared_experts ? shared_experts->saved_elements(op_level).total() : 0;
  return {2 * args.num_experts + args.top_k * per_copy + shared, 0};
}

int64_t MoEImpl::unused_params_per_token() const {
  return (args.num_experts - args.top_k) * 3 * dim * args.hidden_dim;
}

int64_t MoEImpl::flops_per_token(int64_t) const {
  const int64_t expert_params = 3 * dim * args.hidden_dim;
  const int64_t shared = shared_experts ? shared_experts->flops_per_token(0) : 0;
  return 6 * (router->gate->weight.numel() + args.top_k * expert_params) + shared;
}

std::vector<ElementwiseOp*> MoEImpl::recomputed_ops() {
  std::vector<ElementwiseOp*> ops = {&experts->gate};
  if (shared_experts) ops.push_back(&shared_experts->gate);
  return ops;
}

}  // namespace titan::models
