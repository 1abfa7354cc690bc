#include "titan/distributed/collectives.h"

#include <fmt/format.h>

#include "titan/errors.h"
#include "titan/platform/autograd_state.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using GroupState = c10::intrusive_ptr<platform::AutogradState<ProcessGroup*>>;

ProcessGroup& group_of(AutogradContext* ctx) { return *platform::saved_state<ProcessGroup*>(ctx); }

bool reducible(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble;
}

torch::Tensor all_reduce_sum(const torch::Tensor& x, ProcessGroup& group, const char* what) {
  auto buf = reducible(x) ? x.clone() : x.to(torch::kFloat);
  group.all_reduce_(buf, ReduceOp::Sum, what);
  return buf.to(x.scalar_type());
}

// x: [..., n at dim, ...] -> [..., size * n, ...].
torch::Tensor gather(const torch::Tensor& x, int64_t dim, ProcessGroup& group, const char* what) {
  auto front = x.movedim(dim, 0).contiguous();    // [n, ...]
  auto gathered = group.all_gather(front, what);  // [size * n, ...]
  return gathered.movedim(0, dim).contiguous();
}

// x: [..., size * n at dim, ...] -> this rank's [..., n, ...] of the sum over ranks.
torch::Tensor scatter_sum(const torch::Tensor& x, int64_t dim, ProcessGroup& group,
                          const char* what) {
  auto front = x.movedim(dim, 0);  // [size * n, ...]
  auto shape = front.sizes().vec();
  shape[0] /= group.size();
  auto flat = front.to(reducible(x) ? x.scalar_type() : torch::kFloat).contiguous().view(-1);
  auto mine = group.reduce_scatter(flat, what).view(shape);  // [n, ...]
  return mine.movedim(0, dim).contiguous().to(x.scalar_type());
}

int64_t wrap_dim(int64_t dim, const torch::Tensor& x) { return dim < 0 ? dim + x.dim() : dim; }

struct CopyToRegion : public torch::autograd::Function<CopyToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const GroupState& group) {
    platform::save_state(ctx, group);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce_sum(grads[0], group_of(ctx), "TP all-reduce of an input gradient"),
            torch::Tensor()};
  }
};

struct ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, const GroupState& group) {
    return all_reduce_sum(x, *group->value, "TP all-reduce of partial outputs");
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

struct AllGatherAlong : public torch::autograd::Function<AllGatherAlong> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t dim,
                               const GroupState& group, std::string what) {
    platform::save_state(ctx, group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["what"] = what;
    return gather(x, dim, *group->value, what.c_str());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt();
    const auto what = ctx->saved_data["what"].toStringRef() + ": reduce-scatter of a gradient";
    return {scatter_sum(grads[0], dim, group_of(ctx), what.c_str()), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

struct ReduceScatterAlong : public torch::autograd::Function<ReduceScatterAlong> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t dim,
                               const GroupState& group) {
    platform::save_state(ctx, group);
    ctx->saved_data["dim"] = dim;
    return scatter_sum(x, dim, *group->value, "SP reduce-scatter");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt();
    return {gather(grads[0], dim, group_of(ctx), "SP all-gather of a gradient"), torch::Tensor(),
            torch::Tensor()};
  }
};

struct GatherLastDim : public torch::autograd::Function<GatherLastDim> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const GroupState& group) {
    platform::save_state(ctx, group);
    ctx->saved_data["n"] = x.size(-1);
    return gather(x, x.dim() - 1, *group->value, "TP all-gather of the last dimension");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int64_t n = ctx->saved_data["n"].toInt();
    return {grads[0].narrow(-1, group_of(ctx).rank() * n, n).contiguous(), torch::Tensor()};
  }
};

// The all-to-all of rows in two autograd nodes, so that other work fits between them. Forward:
// StartRows posts it and returns the buffer being filled, FinishRows waits. Backward runs in
// reverse: FinishRows posts the gradients' return trip (passing its gradient on untouched),
// StartRows waits for it and returns what arrived. The engine runs the ready node created last
// first, so the backward of work done between the two forwards runs between the two backwards.
struct RowsInFlight {
  ProcessGroup* group;
  std::vector<int64_t> out_splits, in_splits;
  PendingWork forward, backward;
};
using FlightState = c10::intrusive_ptr<platform::AutogradState<RowsInFlight>>;

struct StartRows : public torch::autograd::Function<StartRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const FlightState& flight) {
    platform::save_state(ctx, flight);
    auto& f = flight->value;
    f.forward = f.group->start_all_to_all(x, f.out_splits, f.in_splits, "EP all-to-all of tokens");
    return f.forward.buffer;  // [sum out_splits, ...], valid once FinishRows has run
  }
  static variable_list backward(AutogradContext* ctx, variable_list) {
    auto& f = platform::saved_state<RowsInFlight>(ctx);
    return {f.group->finish(f.backward), torch::Tensor()};
  }
};

struct FinishRows : public torch::autograd::Function<FinishRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& in_flight,
                               const FlightState& flight) {
    platform::save_state(ctx, flight);
    auto& f = flight->value;
    auto rows = f.group->finish(f.forward);
    return rows.is_same(in_flight) ? rows.view_as(rows) : rows;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // The rows travel back the way they came: what this rank received, it returns.
    auto& f = platform::saved_state<RowsInFlight>(ctx);
    f.backward = f.group->start_all_to_all(grads[0], f.in_splits, f.out_splits,
                                           "EP all-to-all of token gradients");
    return {grads[0], torch::Tensor()};  // StartRows's backward returns the travelled rows
  }
};

GroupState handle(ProcessGroup& group) { return platform::autograd_state(&group); }

}  // namespace

torch::Tensor copy_to_parallel_region(const torch::Tensor& x, ProcessGroup& group) {
  if (group.size() == 1) return x;
  return CopyToRegion::apply(x, handle(group));
}

torch::Tensor reduce_from_parallel_region(const torch::Tensor& x, ProcessGroup& group) {
  if (group.size() == 1) return x;
  return ReduceFromRegion::apply(x, handle(group));
}

torch::Tensor all_gather_along(const torch::Tensor& x, int64_t dim, ProcessGroup& group,
                               const std::string& what) {
  if (group.size() == 1) return x;
  return AllGatherAlong::apply(x, wrap_dim(dim, x), handle(group), what);
}

torch::Tensor reduce_scatter_along(const torch::Tensor& x, int64_t dim, ProcessGroup& group) {
  if (group.size() == 1) return x;
  dim = wrap_dim(dim, x);
  if (x.size(dim) % group.size() != 0) {
    throw ConfigError(
        fmt::format("cannot reduce-scatter a dimension of {} over the {} ranks of "
                    "group {}: it must be divisible",
                    x.size(dim), group.size(), group.name()));
  }
  return ReduceScatterAlong::apply(x, dim, handle(group));
}

torch::Tensor gather_last_dim(const torch::Tensor& x, ProcessGroup& group) {
  if (group.size() == 1) return x;
  return GatherLastDim::apply(x, handle(group));
}

torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& out_splits,
                              const std::vector<int64_t>& in_splits, ProcessGroup& group,
                              const std::function<void()>& during) {
  if (group.size() == 1) {
    if (during) during();
    return x;
  }
  auto flight = platform::autograd_state(RowsInFlight{&group, out_splits, in_splits, {}, {}});
  auto in_flight = StartRows::apply(x, flight);
  if (during) during();
  return FinishRows::apply(in_flight, flight);
}

}  // namespace titan::distributed
