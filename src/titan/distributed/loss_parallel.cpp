#include "titan/distributed/loss_parallel.h"

#include "titan/platform/autograd_state.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels,
      const c10::intrusive_ptr<platform::AutogradState<ProcessGroup*>>& state) {
    auto& group = *state->value;
    const int64_t vocab = logits.size(-1);
    auto x = logits.reshape({-1, vocab}).to(torch::kFloat);  // x: [N, Vl]
    auto max = std::get<0>(x.max(1));                        // max: [N]
    group.all_reduce_(max, ReduceOp::Max, "loss-parallel max of the logits");
    auto shifted = x - max.unsqueeze(1);  // shifted: [N, Vl], <= 0 at the global max
    auto softmax = shifted.exp();         // softmax: [N, Vl] (unnormalised for now)
    auto sum_exp = softmax.sum(1);        // sum_exp: [N]
    group.all_reduce_(sum_exp, ReduceOp::Sum, "loss-parallel sum of exponentials");
    auto local = labels.reshape({-1}) - group.rank() * vocab;  // local: [N]
    auto inside = local.ge(0).logical_and(local.lt(vocab));    // inside: [N]
    local = local.masked_fill(inside.logical_not(), 0);
    auto picked = shifted.gather(1, local.unsqueeze(1)).squeeze(1) * inside;  // picked: [N]
    group.all_reduce_(picked, ReduceOp::Sum, "loss-parallel logit of the label");
    softmax.div_(sum_exp.unsqueeze(1));
    ctx->save_for_backward({softmax, local, inside});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    ctx->saved_data["shape"] = logits.sizes().vec();
    return (sum_exp.log() - picked).sum();  // scalar
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0].clone();  // grad: [N, Vl] = softmax
    grad.scatter_add_(1, saved[1].unsqueeze(1), -saved[2].to(grad.scalar_type()).unsqueeze(1));
    grad.mul_(grads[0]);
    auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    auto shape = ctx->saved_data["shape"].toIntVector();
    return {grad.view(shape).to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy_sum(const torch::Tensor& local_logits,
                                               const torch::Tensor& labels, ProcessGroup& group) {
  return VocabParallelCrossEntropy::apply(local_logits, labels, platform::autograd_state(&group));
}

}  // namespace titan::distributed
