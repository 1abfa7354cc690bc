#include "titan/components/linear_cross_entropy.h"

#include <algorithm>

#include "titan/platform/autograd_state.h"

namespace titan::components {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The tokens of one loss, as the chunks read them.
struct Tokens {
  torch::Tensor x;       // [N, D]
  torch::Tensor weight;  // [Vl, D]
  torch::Tensor local;   // [N] int64: the label's row in this rank's slice (0 when outside)
  torch::Tensor inside;  // [N] bool: the label is in this rank's slice
  int64_t chunk = 1;     // tokens per chunk
  torch::ScalarType softmax_dtype = torch::kFloat;

  int64_t count() const { return x.size(0); }
  // Tokens [start, start + n) -> their logits [n, Vl] in the softmax dtype.
  torch::Tensor logits(int64_t start, int64_t n) const {
    return torch::mm(x.narrow(0, start, n), weight.t()).to(softmax_dtype);  // [n, Vl]
  }
};

Tokens tokens_of(const torch::Tensor& hidden, const torch::Tensor& weight,
                 const torch::Tensor& labels, ProcessGroup* group, int64_t chunk_tokens) {
  Tokens t;
  const int64_t vocab = weight.size(0);
  t.x = hidden.reshape({-1, hidden.size(-1)});                              // x: [N, D]
  t.weight = weight;                                                        // weight: [Vl, D]
  auto local = labels.reshape({-1}) - (group ? group->rank() * vocab : 0);  // local: [N]
  t.inside = local.ge(0).logical_and(local.lt(vocab));                      // inside: [N]
  t.local = local.masked_fill(t.inside.logical_not(), 0);
  t.chunk = chunk_tokens > 0 ? chunk_tokens : std::max<int64_t>(1, kLogitsPerChunk / vocab);
  t.softmax_dtype = weight.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat;
  return t;
}

// Tokens [start, start + n) with logits z [n, Vl] (overwritten) and log-sum-exps lse [N]: adds
// their gradients of sum(lse - picked) to dx [N, D] (written) and dw [Vl, D] (accumulated).
void add_chunk_grads(const Tokens& t, int64_t start, int64_t n, torch::Tensor z,
                     const torch::Tensor& lse, torch::Tensor& dx, torch::Tensor& dw) {
  z.sub_(lse.narrow(0, start, n).unsqueeze(1)).exp_();  // z: [n, Vl] = softmax
  z.scatter_add_(1, t.local.narrow(0, start, n).unsqueeze(1),
                 -t.inside.narrow(0, start, n).to(z.scalar_type()).unsqueeze(1));  // - one_hot
  auto g = z.to(t.weight.scalar_type());  // g: [n, Vl], as the logits' gradient
  auto xc = t.x.narrow(0, start, n);      // xc: [n, D]
  auto dxc = dx.narrow(0, start, n);      // dxc: [n, D]
  torch::mm_out(dxc, g, t.weight);        // dxc = g @ weight
  if (dw.scalar_type() == g.scalar_type()) {
    dw.addmm_(g.t(), xc);  // dw: [Vl, D] += g^T @ xc
  } else {
    dw.add_(torch::mm(g.t(), xc));  // bf16 chunks summed in fp32
  }
}

// The loss: sum over tokens of lse - the label's logit. With dx and dw, also their gradients
// (dx: [N, D] in x's dtype; dw: [Vl, D] in the softmax dtype).
torch::Tensor chunked_loss(const Tokens& t, ProcessGroup* group, torch::Tensor* dx,
                           torch::Tensor* dw) {
  const int64_t n_tokens = t.count();
  const auto stats = t.x.options().dtype(t.softmax_dtype);
  auto lse = torch::empty({n_tokens}, stats);                                // lse: [N]
  auto picked = torch::empty({n_tokens}, stats);                             // picked: [N]
  auto max = group ? torch::empty({n_tokens}, stats) : torch::Tensor();      // max: [N]
  auto sum_exp = group ? torch::empty({n_tokens}, stats) : torch::Tensor();  // sum_exp: [N]
  for (int64_t start = 0; start < n_tokens; start += t.chunk) {
    const int64_t n = std::min(t.chunk, n_tokens - start);
    auto z = t.logits(start, n);  // z: [n, Vl]
    picked.narrow(0, start, n)
        .copy_(z.gather(1, t.local.narrow(0, start, n).unsqueeze(1)).squeeze(1) *
               t.inside.narrow(0, start, n));
    if (!group) {  // whole rows: the gradients now
      lse.narrow(0, start, n).copy_(z.logsumexp(1));
      if (dx) add_chunk_grads(t, start, n, z, lse, *dx, *dw);
      continue;
    }
    auto m = std::get<0>(z.max(1));  // m: [n]
    max.narrow(0, start, n).copy_(m);
    sum_exp.narrow(0, start, n).copy_(z.sub_(m.unsqueeze(1)).exp_().sum(1));
  }
  if (group) {
    auto global_max = max.clone();  // global_max: [N]
    group->all_reduce_(global_max, ReduceOp::Max, "fused loss max of the logits");
    sum_exp.mul_((max - global_max).exp_());
    group->all_reduce_(sum_exp, ReduceOp::Sum, "fused loss sum of exponentials");
    group->all_reduce_(picked, ReduceOp::Sum, "fused loss logit of the label");
    lse = global_max + sum_exp.log();
    for (int64_t start = 0; dx && start < n_tokens; start += t.chunk) {
      const int64_t n = std::min(t.chunk, n_tokens - start);
      add_chunk_grads(t, start, n, t.logits(start, n), lse, *dx, *dw);
    }
  }
  return (lse - picked).sum();
}

using OptionsPtr = c10::intrusive_ptr<platform::AutogradState<LinearCrossEntropyOptions>>;

// Forward computes the gradients of the summed loss; backward scales them by the upstream one.
// The weight's gradient (the whole output projection's, 0.6 GiB for Qwen3's vocabulary) is
// handed over and scaled in place, so it exists once: backward takes it out of the context the
// first time the engine asks for it. A zero-bubble pipeline runs this backward twice, the input
// pass (which does not ask for the weight's gradient) and then the weight pass.
struct LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& labels,
                               const OptionsPtr& options) {
    auto* group = options->value.vocab_group;
    auto t = tokens_of(hidden, weight, labels, group, options->value.chunk_tokens);
    auto dx = torch::empty_like(t.x);                                                 // dx: [N, D]
    auto dw = torch::zeros(weight.sizes(), weight.options().dtype(t.softmax_dtype));  // [Vl, D]
    auto loss = chunked_loss(t, group, &dx, &dw);
    ctx->save_for_backward({dx.view(hidden.sizes())});
    ctx->saved_data["dw"] = dw;
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto dx = ctx->get_saved_variables()[0];
    const auto& g = grads[0];  // scalar
    // Scaled in float32 and rounded once, as the eager cross-entropy's backward does.
    variable_list out = {(dx.to(g.scalar_type()) * g).to(dx.scalar_type()), torch::Tensor(),
                         torch::Tensor(), torch::Tensor()};
    if (ctx->needs_input_grad(1)) {
      auto taken = ctx->saved_data.find("dw");
      TORCH_CHECK(taken != ctx->saved_data.end(),
                  "the fused loss's weight gradient was already handed over: its backward gives "
                  "it once");
      auto dw = taken->second.toTensor();
      ctx->saved_data.erase(taken);
      const auto weight_dtype =
          static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
      out[1] = dw.mul_(g).to(weight_dtype);
    }
    return out;
  }
};

}  // namespace

torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& labels,
                                       const LinearCrossEntropyOptions& options) {
  auto resolved = options;
  if (resolved.vocab_group && resolved.vocab_group->size() == 1) resolved.vocab_group = nullptr;
  if (torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad())) {
    return LinearCrossEntropy::apply(hidden, weight, labels, platform::autograd_state(resolved));
  }
  auto t = tokens_of(hidden, weight, labels, resolved.vocab_group, resolved.chunk_tokens);
  return chunked_loss(t, resolved.vocab_group, nullptr, nullptr);
}

}  // namespace titan::components
