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

// The eager router's choice from logits [T, E] (float32/64).
Routing choose_eagerly(const torch::Tensor& logits, const torch::Tensor& expert_bias,
                       const MoEArgs& args) {
  auto scores = args.score_func == MoEArgs::ScoreFunc::Softmax ? torch::softmax(logits, -1)
                                                               : torch::sigmoid(logits);  // [T, E]
  Routing r;
  {
    torch::NoGradGuard no_grad;
    auto choice = expert_bias.defined() ? scores + expert_bias.to(logits.scalar_type())
                                        : scores;  // choice: [T, E]
    if (args.num_expert_groups > 0) choice = limit_to_groups(choice, args);
    r.experts = top_k_indices(choice, args.top_k);  // [T, K]
  }
  r.gates = scores.gather(1, r.experts);  // [T, K]
  if (args.route_norm) r.gates = r.gates / (r.gates.sum(-1, /*keepdim=*/true) + kRouteNormEps);
  if (args.route_scale != 1.0) r.gates = r.gates * args.route_scale;
  return r;
}

CopyOrder sort_eagerly(const torch::Tensor& experts, int64_t num_experts) {
  auto chosen = experts.reshape({-1});                       // [N = T K], token-major
  auto copy = torch::argsort(chosen, /*stable=*/true);      // [N]
  auto position = torch::empty_like(copy).scatter_(
      0, copy, torch::arange(copy.size(0), copy.options()));  // [N]
  return {position.view(experts.sizes()), copy, torch::bincount(chosen, {}, num_experts)};
}

torch::Tensor permute_eagerly(const torch::Tensor& tokens, const CopyOrder& order,
                              const torch::Tensor& gates) {
  const int64_t k = order.position.size(1);
  auto routed = tokens.index_select(0, order.copy.div(k, "floor"));  // routed: [N, dim]
  if (!gates.defined()) return routed;
  auto g = gates.reshape({-1}).index_select(0, order.copy);  // [N]
  return (routed.to(g.scalar_type()) * g.unsqueeze(1)).to(tokens.scalar_type());
}

torch::Tensor combine_eagerly(const torch::Tensor& expert_out, const CopyOrder& order,
                              const torch::Tensor& gates) {
  auto per_copy = expert_out.index_select(0, order.position.reshape({-1}))
                      .view({order.position.size(0), order.position.size(1),
                             expert_out.size(1)});  // [T, K, dim]
  if (!gates.defined()) return per_copy.sum(1);                                    // [T, dim]
  return (per_copy.to(gates.scalar_type()) * gates.unsqueeze(-1))
      .sum(1)
      .to(expert_out.scalar_type());  // [T, dim]
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
    : args(args),
      gate(register_module("gate", Linear(dim, args.num_experts, options))),
      choose(choose_eagerly) {}

Routing TokenChoiceRouterImpl::forward(const torch::Tensor& x, const torch::Tensor& expert_bias) {
  const auto dtype = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto logits = torch::linear(x.to(dtype), gate->weight.to(dtype));  // [T, E]
  return choose(logits, expert_bias, args);
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
    : dim(dim), args(moe_args), moves{sort_eagerly, permute_eagerly, combine_eagerly} {
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
  auto routing = router(tokens, expert_bias);
  CopyOrder order;
  {
    torch::NoGradGuard no_grad;
    order = moves.sort(routing.experts, args.num_experts);
  }
  if (is_training() && !is_recomputing()) {
    torch::NoGradGuard no_grad;
    if (!tokens_per_expert.defined()) {
      tokens_per_expert =
          torch::zeros({args.num_experts}, order.counts.options().dtype(torch::kFloat32));
    }
    tokens_per_expert.add_(order.counts);
  }
  const torch::Tensor none;
  auto routed = moves.permute(tokens, order,
                              args.score_before_experts ? routing.gates : none);  // [N, dim]
  auto counts_cpu = order.counts.cpu();
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
  auto out = moves.combine(expert_out, order, args.score_before_experts ? none : routing.gates)
                 .view(x.sizes());  // out: [B, S, dim]
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
