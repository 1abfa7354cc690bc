#include "titan/distributed/linear_cross_entropy.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "titan/platform/autograd_state.h"
#include "titan/platform/deferred_weight_grad.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The tokens of one loss, as the blocks read them.
struct Tokens {
  torch::Tensor x;       // [N, D]
  torch::Tensor weight;  // [Vl, D]
  torch::Tensor local;   // [N] int64: the label's row in this rank's slice (-1 when outside)
  LossBlock block;
  torch::ScalarType softmax_dtype = torch::kFloat;

  int64_t count() const { return x.size(0); }
  int64_t vocab() const { return weight.size(0); }
  // Tokens [t, t + n) over vocabulary rows [v, v + m) -> their logits [n, m] in the softmax
  // dtype.
  torch::Tensor logits(int64_t t, int64_t n, int64_t v, int64_t m) const {
    return torch::mm(x.narrow(0, t, n), weight.narrow(0, v, m).t()).to(softmax_dtype);
  }
  // Tokens [t, t + n) against vocabulary rows [v, v + m): each label's column in the block,
  // clamped into it ([n, 1] int64), and whether it is there ([n, 1] in `dtype`). Masks, not
  // index lists: no device synchronisation.
  std::pair<torch::Tensor, torch::Tensor> labels_in(int64_t t, int64_t n, int64_t v, int64_t m,
                                                    torch::ScalarType dtype) const {
    auto column = (local.narrow(0, t, n) - v).unsqueeze(1);  // [n, 1]
    auto inside = column.ge(0).logical_and(column.lt(m));    // [n, 1]
    return {column.clamp(0, m - 1), inside.to(dtype)};
  }
};

Tokens tokens_of(const torch::Tensor& hidden, const torch::Tensor& weight,
                 const torch::Tensor& labels, const LinearCrossEntropyOptions& options) {
  Tokens t;
  const int64_t vocab = weight.size(0);
  auto* group = options.vocab_group;
  t.x = hidden.reshape({-1, hidden.size(-1)});                              // x: [N, D]
  t.weight = weight;                                                        // weight: [Vl, D]
  auto local = labels.reshape({-1}) - (group ? group->rank() * vocab : 0);  // local: [N]
  t.local = local.masked_fill(local.lt(0).logical_or(local.ge(vocab)), -1);
  t.block = loss_block(t.count(), vocab, group != nullptr, options);
  t.softmax_dtype = weight.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat;
  return t;
}

// Each token's softmax statistics over this rank's vocabulary: max [N], sum_exp [N] (of the
// logits less max) and picked [N] (the label's logit, 0 when the label is another rank's).
struct Stats {
  torch::Tensor max, sum_exp, picked;
};

// Folds the logits z [n, m] of tokens [t, t + n) over rows [v, v + m) into `s` (online, as
// FlashAttention's softmax: the running sum is rescaled when a block raises the maximum), and
// leaves exp(z - the running maximum) in z.
void add_block_stats(const Tokens& tk, int64_t t, int64_t v, torch::Tensor& z, Stats& s) {
  const int64_t n = z.size(0), m = z.size(1);
  auto [column, inside] = tk.labels_in(t, n, v, m, z.scalar_type());
  s.picked.narrow(0, t, n).add_((z.gather(1, column) * inside).squeeze(1));
  auto max = s.max.narrow(0, t, n), sum_exp = s.sum_exp.narrow(0, t, n);  // [n] each
  auto new_max = torch::maximum(max, z.amax(1));                          // [n]
  z.sub_(new_max.unsqueeze(1)).exp_();
  sum_exp.mul_((max - new_max).exp_()).add_(z.sum(1));
  max.copy_(new_max);
}

// out += a @ b, summed in out's dtype (bf16 blocks' products added in fp32).
void add_product(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) {
  if (out.scalar_type() == a.scalar_type()) {
    out.addmm_(a, b);
  } else {
    out.add_(torch::mm(a, b));
  }
}

// Tokens [t, t + n) over rows [v, v + m) with their softmax p [n, m] (overwritten): adds the
// block's gradients of sum(lse - picked) to dx [N, D] and dw [Vl, D] (both in the softmax
// dtype).
void add_block_grads(const Tokens& tk, int64_t t, int64_t v, torch::Tensor p, torch::Tensor& dx,
                     torch::Tensor& dw) {
  const int64_t n = p.size(0), m = p.size(1);
  auto [column, inside] = tk.labels_in(t, n, v, m, p.scalar_type());
  p.scatter_add_(1, column, -inside);      // - one_hot
  auto g = p.to(tk.weight.scalar_type());  // g: [n, m], the logits' gradient
  auto dxb = dx.narrow(0, t, n);           // dxb: [n, D]
  add_product(dxb, g, tk.weight.narrow(0, v, m));
  auto dwb = dw.narrow(0, v, m);  // dwb: [m, D]
  add_product(dwb, g.t(), tk.x.narrow(0, t, n));
}

// Calls fn(t, n, v, m) for every block, token blocks outside.
template <typename Fn>
void for_each_block(const Tokens& tk, const Fn& fn) {
  for (int64_t t = 0; t < tk.count(); t += tk.block.tokens) {
    const int64_t n = std::min(tk.block.tokens, tk.count() - t);
    for (int64_t v = 0; v < tk.vocab(); v += tk.block.vocab) {
      fn(t, n, v, std::min(tk.block.vocab, tk.vocab() - v));
    }
  }
}

// The loss: sum over tokens of lse - the label's logit. With dx and dw, also their gradients
// (dx: [N, D], dw: [Vl, D], both in the softmax dtype and zero on entry).
torch::Tensor blocked_loss(const Tokens& tk, ProcessGroup* group, torch::Tensor* dx,
                           torch::Tensor* dw) {
  const auto stats = tk.x.options().dtype(tk.softmax_dtype);
  const int64_t n_tokens = tk.count();
  Stats s{torch::full({n_tokens}, -std::numeric_limits<double>::infinity(), stats),
          torch::zeros({n_tokens}, stats), torch::zeros({n_tokens}, stats)};
  const bool one_sweep = tk.block.one_sweep;
  for_each_block(tk, [&](int64_t t, int64_t n, int64_t v, int64_t m) {
    auto z = tk.logits(t, n, v, m);  // z: [n, m]
    add_block_stats(tk, t, v, z, s);
    if (one_sweep && dx) {
      add_block_grads(tk, t, v, z.div_(s.sum_exp.narrow(0, t, n).unsqueeze(1)), *dx, *dw);
    }
  });
  if (group) {
    auto global_max = s.max.clone();  // global_max: [N]
    group->all_reduce_(global_max, ReduceOp::Max, "fused loss max of the logits");
    s.sum_exp.mul_((s.max - global_max).exp_());
    group->all_reduce_(s.sum_exp, ReduceOp::Sum, "fused loss sum of exponentials");
    group->all_reduce_(s.picked, ReduceOp::Sum, "fused loss logit of the label");
    s.max = global_max;
  }
  auto lse = s.max + s.sum_exp.log();  // lse: [N]
  if (dx && !one_sweep) {
    for_each_block(tk, [&](int64_t t, int64_t n, int64_t v, int64_t m) {
      auto z = tk.logits(t, n, v, m);  // z: [n, m]
      add_block_grads(tk, t, v, z.sub_(lse.narrow(0, t, n).unsqueeze(1)).exp_(), *dx, *dw);
    });
  }
  return (lse - s.picked).sum();
}

using OptionsPtr = c10::intrusive_ptr<platform::AutogradState<LinearCrossEntropyOptions>>;

// Forward computes the gradients of the summed loss; backward scales them by the upstream one.
// The weight's gradient (the whole output projection's, 0.6 GiB for Qwen3's vocabulary) is
// handed over and scaled in place, so it exists once: backward takes it out of the context the
// first time the engine asks for it, or to a zero-bubble weight pass when the input pass runs
// this backward without asking for it.
struct LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& labels,
                               const OptionsPtr& options,
                               const platform::DeferredWeightGradPtr& slot) {
    platform::save_slot(ctx, slot);
    auto t = tokens_of(hidden, weight, labels, options->value);
    const auto sums = weight.options().dtype(t.softmax_dtype);
    auto dx = torch::zeros(t.x.sizes(), sums);     // dx: [N, D]
    auto dw = torch::zeros(weight.sizes(), sums);  // dw: [Vl, D]
    auto loss = blocked_loss(t, options->value.vocab_group, &dx, &dw);
    ctx->save_for_backward({dx.view(hidden.sizes())});
    ctx->saved_data["dw"] = dw;
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["hidden_dtype"] = static_cast<int64_t>(hidden.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto dx = ctx->get_saved_variables()[0];
    const auto& g = grads[0];  // scalar
    const auto dtype = [&](const char* key) {
      return static_cast<torch::ScalarType>(ctx->saved_data[key].toInt());
    };
    // Summed and scaled in float32, rounded once, as the eager cross-entropy's backward does.
    variable_list out = {(dx * g).to(dtype("hidden_dtype")), torch::Tensor(), torch::Tensor(),
                         torch::Tensor(), torch::Tensor()};
    // Scaled in place when handed over: it exists once.
    const auto scaled = [g, weight_dtype = dtype("weight_dtype")](torch::Tensor dw) {
      return dw.mul_(g).to(weight_dtype);
    };
    auto kept = ctx->saved_data.find("dw");
    if (ctx->needs_input_grad(1)) {
      TORCH_CHECK(kept != ctx->saved_data.end(),
                  "the fused loss's weight gradient was already handed over: its backward gives "
                  "it once");
      auto dw = kept->second.toTensor();
      ctx->saved_data.erase(kept);
      out[1] = scaled(dw);
    } else if (kept != ctx->saved_data.end()) {  // an input pass: the weight pass may take it
      platform::weight_grad(ctx, 1, [scaled, dw = kept->second.toTensor()] { return scaled(dw); });
    }
    return out;
  }
};

}  // namespace

LossBlock loss_block(int64_t tokens, int64_t vocab, bool sliced,
                     const LinearCrossEntropyOptions& options) {
  tokens = std::max<int64_t>(tokens, 1);
  vocab = std::max<int64_t>(vocab, 1);
  LossBlock b;
  // Whole rows for enough tokens, where they fit and the vocabulary is not a slice.
  const int64_t whole_rows_tokens =
      std::min({tokens, kTokensPerBlock, std::max(kOneSweepTokens, kLogitsPerBlock / vocab)});
  const bool defaults = options.block_tokens <= 0 && options.block_vocab <= 0;
  if (defaults && !sliced && whole_rows_tokens * vocab <= kOneSweepLogits) {
    b.tokens = whole_rows_tokens;
    b.vocab = vocab;
  } else {  // the caller's blocks, else kLogitsPerBlock ones (two sweeps)
    b.tokens = std::min(tokens, options.block_tokens > 0 ? options.block_tokens : kTokensPerBlock);
    b.vocab =
        std::min(vocab, options.block_vocab > 0 ? options.block_vocab
                                                : std::max<int64_t>(1, kLogitsPerBlock / b.tokens));
  }
  b.one_sweep = !sliced && b.vocab >= vocab;
  return b;
}

torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& labels,
                                       const LinearCrossEntropyOptions& options) {
  auto resolved = options;
  if (resolved.vocab_group && resolved.vocab_group->size() == 1) resolved.vocab_group = nullptr;
  if (torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad())) {
    return platform::apply_deferrable<LinearCrossEntropy>(
        /*weight_input=*/1, hidden, weight, labels, platform::autograd_state(resolved));
  }
  return blocked_loss(tokens_of(hidden, weight, labels, resolved), resolved.vocab_group, nullptr,
                      nullptr);
}

}  // namespace titan::distributed
