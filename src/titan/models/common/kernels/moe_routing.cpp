#include "titan/models/common/kernels/moe_routing.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "titan/platform/autograd_state.h"

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kRouteNormEpsilon = 1e-20;  // as the eager router's

// Tokens per task: about 32K elements of `width` each.
int64_t token_grain(int64_t width) { return std::max<int64_t>(1, (int64_t(1) << 15) / width); }

// ---- the router, after its logits --------------------------------------------------------

// choice: [E] -> eligible: [E], cleared for the experts outside the num_limited_groups groups
// with the largest sums of their two best choices (ties to the lower group).
template <typename acc_t>
void limit_groups(const acc_t* choice, const MoEArgs& a, int64_t E, std::vector<acc_t>& group,
                  std::vector<char>& eligible) {
  const int64_t G = a.num_expert_groups, per = E / G;
  for (int64_t g = 0; g < G; ++g) {
    acc_t first = choice[g * per], second = choice[g * per + 1];
    if (second > first) std::swap(first, second);
    for (int64_t e = g * per + 2; e < (g + 1) * per; ++e) {
      if (choice[e] > first) {
        second = first;
        first = choice[e];
      } else if (choice[e] > second) {
        second = choice[e];
      }
    }
    group[g] = first + second;
  }
  std::fill(eligible.begin(), eligible.end(), 0);
  std::vector<char> taken(G, 0);
  for (int64_t kept = 0; kept < a.num_limited_groups; ++kept) {
    int64_t best = -1;
    for (int64_t g = 0; g < G; ++g) {
      if (!taken[g] && (best < 0 || group[g] > group[best])) best = g;
    }
    taken[best] = 1;
    std::fill(eligible.begin() + best * per, eligible.begin() + (best + 1) * per, 1);
  }
}

// scores: [T, E] (acc), bias: [E] (acc) or null -> experts: [T, K], gates: [T, K] (acc)
//   choice = scores + bias (group-limited); experts = the K best choices, ties to the lower
//   index; gates = scores[experts], / (their sum + eps) with route_norm, x route_scale
template <typename acc_t>
void route_forward(const acc_t* scores, const acc_t* bias, const MoEArgs& a, int64_t T, int64_t E,
                   int64_t* experts, acc_t* gates) {
  const int64_t K = a.top_k;
  at::parallel_for(0, T, token_grain(E), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> choice(E), group(a.num_expert_groups);
    std::vector<char> eligible(E, 1);
    for (int64_t t = begin; t < end; ++t) {
      const acc_t* s = scores + t * E;
      for (int64_t e = 0; e < E; ++e) choice[e] = bias ? s[e] + bias[e] : s[e];
      if (a.num_expert_groups > 0) {
        limit_groups(choice.data(), a, E, group, eligible);
      } else {
        std::fill(eligible.begin(), eligible.end(), 1);
      }
      int64_t* ex = experts + t * K;
      acc_t* g = gates + t * K;
      acc_t sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        int64_t best = -1;
        for (int64_t e = 0; e < E; ++e) {
          if (eligible[e] && (best < 0 || choice[e] > choice[best])) best = e;
        }
        eligible[best] = 0;
        ex[k] = best;
        g[k] = s[best];
        sum += g[k];
      }
      for (int64_t k = 0; k < K; ++k) {
        if (a.route_norm) g[k] = g[k] / (sum + acc_t(kRouteNormEpsilon));
        if (a.route_scale != 1.0) g[k] = g[k] * acc_t(a.route_scale);
      }
    }
  });
}

// dgates: [T, K], scores: [T, E], experts: [T, K] -> dlogits: [T, E] (acc)
//   dg = dgates x route_scale;  route_norm (S = sum_k s_k + eps): ds_k = dg_k / S - (dg . s) / S^2
//   softmax: dlogits_e = s_e (ds_e - sum_k ds_k s_k);  sigmoid: dlogits_e = ds_e s_e (1 - s_e)
//   (ds_e = 0 for the experts not chosen)
template <typename acc_t>
void route_backward(const acc_t* dgates, const acc_t* scores, const int64_t* experts,
                    const MoEArgs& a, int64_t T, int64_t E, acc_t* dlogits) {
  const int64_t K = a.top_k;
  at::parallel_for(0, T, token_grain(E), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> ds(K);
    for (int64_t t = begin; t < end; ++t) {
      const acc_t* s = scores + t * E;
      const int64_t* ex = experts + t * K;
      acc_t sum = 0, dot = 0;
      for (int64_t k = 0; k < K; ++k) {
        ds[k] = dgates[t * K + k] * acc_t(a.route_scale);
        sum += s[ex[k]];
        dot += ds[k] * s[ex[k]];
      }
      if (a.route_norm) {
        const acc_t S = sum + acc_t(kRouteNormEpsilon);
        for (int64_t k = 0; k < K; ++k) ds[k] = ds[k] / S - dot / (S * S);
      }
      acc_t* dl = dlogits + t * E;
      if (a.score_func == MoEArgs::ScoreFunc::Softmax) {
        acc_t inner = 0;
        for (int64_t k = 0; k < K; ++k) inner += ds[k] * s[ex[k]];
        for (int64_t e = 0; e < E; ++e) dl[e] = s[e] * -inner;
        for (int64_t k = 0; k < K; ++k) dl[ex[k]] = s[ex[k]] * (ds[k] - inner);
      } else {
        std::fill(dl, dl + E, acc_t(0));
        for (int64_t k = 0; k < K; ++k) dl[ex[k]] = ds[k] * s[ex[k]] * (acc_t(1) - s[ex[k]]);
      }
    }
  });
}

struct RouteFn : public torch::autograd::Function<RouteFn> {
  using State = c10::intrusive_ptr<platform::AutogradState<MoEArgs>>;

  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits_in,
                               const std::optional<torch::Tensor>& expert_bias,
                               const State& state) {
    const MoEArgs& args = state->value;
    auto logits = logits_in.contiguous();  // logits: [T, E]
    const int64_t T = logits.size(0), E = logits.size(1);
    auto scores = (args.score_func == MoEArgs::ScoreFunc::Softmax ? torch::softmax(logits, -1)
                                                                   : torch::sigmoid(logits))
                      .contiguous();                               // scores: [T, E]
    auto experts = torch::empty({T, args.top_k}, logits.options().dtype(torch::kLong));  // [T, K]
    auto gates = torch::empty({T, args.top_k}, logits.options());                        // [T, K]
    auto bias =  // bias: [E] in the logits' dtype, as the eager router adds it
        expert_bias ? expert_bias->to(logits.scalar_type()).contiguous() : torch::Tensor();
    AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "moe_route_forward", [&] {
      const scalar_t* b = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
      route_forward(scores.data_ptr<scalar_t>(), b, args, T, E, experts.data_ptr<int64_t>(),
                    gates.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({scores, experts});
    platform::save_state(ctx, state);
    ctx->mark_non_differentiable({experts});
    return {gates, experts};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &scores = saved[0], &experts = saved[1];
    const auto& args = platform::saved_state<MoEArgs>(ctx);
    auto dgates = grads[0].contiguous();           // dgates: [T, K]
    auto dlogits = torch::empty_like(scores);      // dlogits: [T, E]
    AT_DISPATCH_FLOATING_TYPES(scores.scalar_type(), "moe_route_backward", [&] {
      route_backward(dgates.data_ptr<scalar_t>(), scores.data_ptr<scalar_t>(),
                     experts.data_ptr<int64_t>(), args, scores.size(0), scores.size(1),
                     dlogits.data_ptr<scalar_t>());
    });
    return {dlogits, torch::Tensor(), torch::Tensor()};
  }
};

// ---- token order <-> expert order --------------------------------------------------------
// position: [T, K], the row of each copy among the N = T K sorted rows; g: [T, K] (acc) or
// null (every gate 1).

// x: [T, D] -> out: [N, D], out[position[t, k]] = g[t, k] x[t]
template <typename scalar_t, typename acc_t>
void spread(const scalar_t* x, const int64_t* position, const acc_t* g, scalar_t* out, int64_t T,
            int64_t K, int64_t D) {
  at::parallel_for(0, T, token_grain(K * D), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const scalar_t* xt = x + t * D;
      for (int64_t k = 0; k < K; ++k) {
        scalar_t* o = out + position[t * K + k] * D;
        if (!g) {
          std::copy(xt, xt + D, o);
          continue;
        }
        const acc_t gk = g[t * K + k];
        for (int64_t d = 0; d < D; ++d) o[d] = scalar_t(acc_t(xt[d]) * gk);
      }
    }
  });
}

// rows: [N, D] -> out: [T, D], out[t] = sum_k g[t, k] rows[position[t, k]] (acc, rounded once)
template <typename scalar_t, typename acc_t>
void gather_sum(const scalar_t* rows, const int64_t* position, const acc_t* g, scalar_t* out,
                int64_t T, int64_t K, int64_t D) {
  at::parallel_for(0, T, token_grain(K * D), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(D);
    for (int64_t t = begin; t < end; ++t) {
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = 0; k < K; ++k) {
        const scalar_t* r = rows + position[t * K + k] * D;
        const acc_t gk = g ? g[t * K + k] : acc_t(1);
        for (int64_t d = 0; d < D; ++d) acc[d] += gk * acc_t(r[d]);
      }
      scalar_t* o = out + t * D;
      for (int64_t d = 0; d < D; ++d) o[d] = scalar_t(acc[d]);
    }
  });
}

// rows: [N, D], x: [T, D] -> dots: [T, K] (acc), dots[t, k] = rows[position[t, k]] . x[t]
template <typename scalar_t, typename acc_t>
void copy_dots(const scalar_t* rows, const scalar_t* x, const int64_t* position, acc_t* dots,
               int64_t T, int64_t K, int64_t D) {
  at::parallel_for(0, T, token_grain(K * D), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const scalar_t* xt = x + t * D;
      for (int64_t k = 0; k < K; ++k) {
        const scalar_t* r = rows + position[t * K + k] * D;
        acc_t dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += acc_t(r[d]) * acc_t(xt[d]);
        dots[t * K + k] = dot;
      }
    }
  });
}

enum class Move { kSpread, kGatherSum };

// One of the two moves on `in` ([T, D] to spread, [N, D] to gather) into `out`.
void move(Move m, const torch::Tensor& in, const torch::Tensor& position, const torch::Tensor& g,
          const torch::Tensor& out) {
  const int64_t T = position.size(0), K = position.size(1), D = in.size(1);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, in.scalar_type(), "moe_copies_move", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t* gp = g.defined() ? g.data_ptr<acc_t>() : nullptr;
    if (m == Move::kSpread) {
      spread(in.data_ptr<scalar_t>(), position.data_ptr<int64_t>(), gp, out.data_ptr<scalar_t>(),
             T, K, D);
    } else {
      gather_sum(in.data_ptr<scalar_t>(), position.data_ptr<int64_t>(), gp,
                 out.data_ptr<scalar_t>(), T, K, D);
    }
  });
}

// rows: [N, D], x: [T, D] -> [T, K] in the gates' dtype (copy_dots).
torch::Tensor dots_of(const torch::Tensor& rows, const torch::Tensor& x,
                      const torch::Tensor& position, const torch::Tensor& gates) {
  auto dots = torch::empty_like(gates);  // dots: [T, K]
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, rows.scalar_type(), "moe_copy_dots", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    copy_dots(rows.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), position.data_ptr<int64_t>(),
              dots.data_ptr<acc_t>(), position.size(0), position.size(1), rows.size(1));
  });
  return dots;
}

// Forward `forward_move` from token order (kSpread, permute) or to it (kGatherSum, combine);
// backward the other move, and the gates' gradient as dot products with the token-side tensor.
struct CopiesFn : public torch::autograd::Function<CopiesFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& in_raw,
                               const std::optional<torch::Tensor>& gates_raw,
                               const torch::Tensor& position, int64_t forward_move) {
    auto in = in_raw.contiguous();  // in: [T, D] (permute) or [N, D] (combine)
    auto gates = gates_raw ? gates_raw->contiguous() : torch::Tensor();  // [T, K] or undefined
    const int64_t T = position.size(0), N = position.numel();
    const auto m = Move(forward_move);
    auto out = torch::empty({m == Move::kSpread ? N : T, in.size(1)}, in.options());
    move(m, in, position, gates, out);
    // `in` only for the gates' gradient; without gates backward needs its row count alone.
    ctx->save_for_backward({gates.defined() ? in : torch::Tensor(), gates, position});
    ctx->saved_data["move"] = forward_move;
    ctx->saved_data["rows"] = in.size(0);
    return out;  // out: [N, D] (permute) or [T, D] (combine)
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &in = saved[0], &gates = saved[1], &position = saved[2];
    const auto m = Move(ctx->saved_data["move"].toInt());
    auto dout = grads[0].contiguous();  // dout: [N, D] (permute) or [T, D] (combine)
    auto din = torch::empty({ctx->saved_data["rows"].toInt(), dout.size(1)},
                            dout.options());  // din: [T, D] (permute) or [N, D] (combine)
    move(m == Move::kSpread ? Move::kGatherSum : Move::kSpread, dout, position, gates, din);
    torch::Tensor dgates;  // [T, K]: with the gates, the expert-side rows . the token-side rows
    if (gates.defined()) {
      dgates = m == Move::kSpread ? dots_of(dout, in, position, gates)
                                  : dots_of(in, dout, position, gates);
    }
    return {din, dgates, torch::Tensor(), torch::Tensor()};
  }
};

// An optional input of an autograd function: apply() cannot take an undefined tensor.
std::optional<torch::Tensor> optional(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

void check_copies(const char* what, const torch::Tensor& rows, const CopyOrder& order,
                  const torch::Tensor& gates, int64_t expected_rows) {
  TORCH_CHECK(rows.device().is_cpu(), what, ": the fused kernel runs on the CPU, got ",
              rows.device());
  TORCH_CHECK(rows.dim() == 2 && rows.size(0) == expected_rows, what, ": expected [",
              expected_rows, ", dim] rows, got ", rows.sizes());
  TORCH_CHECK(!gates.defined() || (gates.sizes() == order.position.sizes() &&
                                   gates.scalar_type() == at::toOpMathType(rows.scalar_type())),
              what, ": gates ", gates.sizes(), " must be [T, K] in the rows' accumulation dtype");
}

}  // namespace

Routing route(const torch::Tensor& logits, const torch::Tensor& expert_bias, const MoEArgs& args) {
  TORCH_CHECK(logits.device().is_cpu(), "moe route: the fused kernel runs on the CPU, got ",
              logits.device());
  TORCH_CHECK(logits.dim() == 2 && logits.size(1) == args.num_experts,
              "moe route: logits must be [T, ", args.num_experts, "], got ", logits.sizes());
  TORCH_CHECK(!expert_bias.defined() || expert_bias.numel() == args.num_experts,
              "moe route: expert_bias must have ", args.num_experts, " entries, got ",
              expert_bias.sizes());
  validate(args);  // k and the group limits within range
  auto out = RouteFn::apply(logits, optional(expert_bias), platform::autograd_state(args));
  return {out[1], out[0]};
}

CopyOrder sort_copies(const torch::Tensor& experts, int64_t num_experts) {
  TORCH_CHECK(experts.device().is_cpu(), "sort_copies: the fused kernel runs on the CPU, got ",
              experts.device());
  auto chosen = experts.contiguous();  // chosen: [T, K]
  const int64_t N = chosen.numel();
  const auto longs = chosen.options().dtype(torch::kLong);
  CopyOrder order{torch::empty_like(chosen), torch::empty({N}, longs),
                  torch::zeros({num_experts}, longs)};
  const int64_t* e = chosen.data_ptr<int64_t>();
  int64_t *position = order.position.data_ptr<int64_t>(), *copy = order.copy.data_ptr<int64_t>(),
          *counts = order.counts.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    TORCH_CHECK(e[i] >= 0 && e[i] < num_experts, "sort_copies: copy ", i, " goes to expert ",
                e[i], ", outside [0, ", num_experts, ")");
    ++counts[e[i]];
  }
  std::vector<int64_t> next(num_experts, 0);  // the next free row of each expert
  for (int64_t x = 1; x < num_experts; ++x) next[x] = next[x - 1] + counts[x - 1];
  for (int64_t i = 0; i < N; ++i) {
    position[i] = next[e[i]]++;
    copy[position[i]] = i;
  }
  return order;
}

torch::Tensor permute_copies(const torch::Tensor& tokens, const CopyOrder& order,
                             const torch::Tensor& gates) {
  check_copies("permute_copies", tokens, order, gates, order.position.size(0));
  return CopiesFn::apply(tokens, optional(gates), order.position, int64_t(Move::kSpread));
}

torch::Tensor combine_copies(const torch::Tensor& expert_out, const CopyOrder& order,
                             const torch::Tensor& gates) {
  check_copies("combine_copies", expert_out, order, gates, order.position.numel());
  return CopiesFn::apply(expert_out, optional(gates), order.position,
                         int64_t(Move::kGatherSum));
}

}  // namespace titan::models::kernels
