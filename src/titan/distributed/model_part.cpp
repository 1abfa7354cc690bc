#include "titan/distributed/model_part.h"

#include <stdexcept>

#include "titan/distributed/linear_cross_entropy.h"
#include "titan/models/common/block_trace.h"
#include "titan/models/common/weight_module.h"

namespace titan::distributed {
namespace {

// Gives `param` zero-filled storage on `device` in place: every handle to it (the module's
// weight, FSDP's shard, tensor parallelism's placement) sees the new data. PyTorch's to_empty
// replaces the Parameter object instead, since Tensor::set_data refuses a meta -> device move.
void materialize(const torch::Tensor& param, torch::Device device) {
  auto data = torch::zeros(param.sizes(), param.options().device(device));
  param.unsafeGetTensorImpl()->shallow_copy_from(data.getIntrusivePtr());
}

}  // namespace

ModelPart::ModelPart(std::shared_ptr<models::CausalLM> model, const DeviceMesh& mesh)
    : model_(std::move(model)),
      tp_(std::make_unique<TensorParallel>(mesh[MeshGroup::TP], TensorParallelOptions{})) {}

TensorParallel& ModelPart::enable_tensor_parallel(std::shared_ptr<ProcessGroup> group,
                                                  TensorParallelOptions options) {
  tp_ = std::make_unique<TensorParallel>(std::move(group), options);
  return *tp_;
}

ExpertParallel& ModelPart::enable_expert_parallel(std::shared_ptr<ProcessGroup> group) {
  ep_ = std::make_unique<ExpertParallel>(*model_, std::move(group));
  for (auto* m : ep_->modules()) tp_->exclude(*m);
  return *ep_;
}

void ModelPart::set_fsdp(std::shared_ptr<Fsdp> fsdp, torch::ScalarType compute_dtype) {
  fsdp_ = std::move(fsdp);
  compute_dtype_ = compute_dtype;
}

Fsdp& ModelPart::fsdp() const {
  if (!fsdp_) throw std::logic_error("a model part's parallelize must end with apply_fsdp");
  return *fsdp_;
}

void ModelPart::init_weights(torch::Device device, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto params = parameters();
  for (const auto& p : params) materialize(p, device);
  for (const auto& b : model_->buffers()) materialize(b, device);  // MoE expert biases: zeros
  auto modules = models::weight_modules_by_name(*model_);
  for (auto& [name, piece] : state(params, "", /*loading=*/true)) {
    models::init_rows(piece.local, piece.row_offset, name, modules.at(name)->init, seed);
  }
  finish_load();
}

std::vector<torch::Tensor> ModelPart::parameters() const { return fsdp().parameters(); }

torch::Tensor ModelPart::forward_loss_sum(const torch::Tensor& input, const torch::Tensor& labels) {
  if (!fused_loss_) {
    const models::TracedPiece loss{models::TracedPiece::kLoss};
    return models::with_traced_backward(loss, model_->forward(input), [&](const torch::Tensor& l) {
      models::TracedForward traced(loss);
      return tp_->loss_sum(l, labels);
    });
  }
  LinearCrossEntropyOptions options;
  options.vocab_group = &tp_->group();
  return model_->forward(input, [&](const torch::Tensor& hidden, const torch::Tensor& weight) {
    return linear_cross_entropy_sum(hidden, weight, labels, options);
  });
}

void ModelPart::finish_backward() {
  fsdp().finish_gradients();
  tp_->reduce_partial_grads();
}

double ModelPart::grad_sq_sum() {
  auto sq = torch::tensor({fsdp().grad_sq_sum(tp_->norm_weights(parameters()))}, torch::kDouble);
  tp_->group().all_reduce_(sq, ReduceOp::Sum, "gradient norm all-reduce over TP");
  return sq.item<double>();
}

ShardedStateDict ModelPart::state(const std::vector<torch::Tensor>& tensors,
                                  const std::string& prefix, bool loading) {
  auto local = fsdp().shard_view(tensors, prefix);
  if (ep_) local = ep_->to_global(std::move(local), prefix);
  return loading ? tp_->for_load(local, prefix) : tp_->to_global(local, prefix);
}

void ModelPart::finish_load() { tp_->finish_load(); }

}  // namespace titan::distributed
