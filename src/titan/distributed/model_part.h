// One part of the model on this rank with the parallelisms applied to it (TorchTitan's
// `model_parts` entries): the whole model today, a pipeline stage's layers under pipeline
// parallelism. What DTensor placements tell torch about each parameter (sharded rows, tensor-
// parallel slices), this object tells the trainer and checkpoints: which tensors the optimizer
// updates, how the gradient norm sums over ranks, where each piece sits in the whole model.
// A family's parallelize function (TrainSpec::parallelize) fills it in a fixed order:
// tensor parallelism, expert parallelism, activation checkpointing, then FSDP (always last: it
// owns the shards).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "titan/distributed/device_mesh.h"
#include "titan/distributed/expert_parallel.h"
#include "titan/distributed/fsdp.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/distributed/tensor_parallel.h"
#include "titan/models/common/causal_lm.h"

namespace titan::distributed {

class ModelPart {
 public:
  /// `model` as built: on the meta device for training (nothing allocated until
  /// init_weights), or whole on a device. Tensor parallelism starts as the identity on the
  /// mesh's tp group.
  ModelPart(std::shared_ptr<models::CausalLM> model, const DeviceMesh& mesh);

  models::CausalLM& model() { return *model_; }
  TensorParallel& tensor_parallel() { return *tp_; }
  /// Turns tensor parallelism on over `group` (before the family's plan is applied).
  TensorParallel& enable_tensor_parallel(std::shared_ptr<ProcessGroup> group,
                                         TensorParallelOptions options);
  /// Splits the routed experts of every MoE layer over `group` (expert_parallel.h); tensor
  /// parallelism then leaves the expert weights alone.
  ExpertParallel& enable_expert_parallel(std::shared_ptr<ProcessGroup> group);
  /// Null without expert parallelism.
  ExpertParallel* expert_parallel() { return ep_.get(); }
  /// Seconds this rank waited on expert parallelism's all-to-alls (forward and backward) since
  /// the last call (0 without it).
  double take_all_to_all_seconds() { return ep_ ? ep_->take_seconds() : 0.0; }
  /// Seconds this rank waited on FSDP's all-gathers and gradient reductions since the last
  /// call: the communication that compute did not hide.
  double take_fsdp_wait_seconds() { return fsdp().take_wait_seconds(); }
  /// Records FSDP as applied (apply_fsdp) and the dtype the blocks compute in.
  void set_fsdp(std::shared_ptr<Fsdp> fsdp, torch::ScalarType compute_dtype);
  torch::ScalarType compute_dtype() const { return compute_dtype_; }

  /// Allocates this rank's pieces of every parameter on `device` (zeros, so FSDP's padding
  /// rows stay zero) and fills them with the model's init rules from `seed`: the same full
  /// weights under every layout (models/common/init.h); buffers (MoE expert biases) start as
  /// zeros on `device`. Collective over the tp group.
  void init_weights(torch::Device device, uint64_t seed);

  /// The tensors the optimizer updates (FSDP shards), in a fixed order.
  std::vector<torch::Tensor> parameters() const;
  /// A part holding the output: its forward on `input` and the sum over this microbatch's
  /// tokens of the cross-entropy of its logits against labels [B, S] (vocab-parallel under loss
  /// parallelism), or the fused loss's once enable_fused_loss() was called.
  torch::Tensor forward_loss_sum(const torch::Tensor& input, const torch::Tensor& labels);
  /// Compile mode's loss: the output projection fused with the cross-entropy, the logits never
  /// whole (distributed/linear_cross_entropy.h); vocab-parallel under tensor parallelism,
  /// whether or not loss parallelism is on, since the logits are never gathered.
  void enable_fused_loss() { fused_loss_ = true; }
  /// After the step's backward passes: collects FSDP's gradient reductions still in flight,
  /// then sums what tensor parallelism leaves partial.
  void finish_backward();
  /// Squared L2 norm of the gradients of this part over the ranks that shard it (FSDP and
  /// tensor parallel groups), each element counted once (collective).
  double grad_sq_sum();

  /// This rank's pieces of `tensors` (parameters() order, e.g. the optimizer's moments) named
  /// `prefix` + parameter name, in the whole model's coordinates, for saving or (`loading`)
  /// for loading into; after loading, finish_load() puts the pieces in place (collective).
  ShardedStateDict state(const std::vector<torch::Tensor>& tensors, const std::string& prefix,
                         bool loading);
  void finish_load();

 private:
  Fsdp& fsdp() const;

  std::shared_ptr<models::CausalLM> model_;
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<ExpertParallel> ep_;
  std::shared_ptr<Fsdp> fsdp_;
  torch::ScalarType compute_dtype_ = torch::kFloat;
  bool fused_loss_ = false;
};

}  // namespace titan::distributed
