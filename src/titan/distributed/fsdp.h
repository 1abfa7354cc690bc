// Fully Sharded Data Parallel (Zhao et al. 2023, "PyTorch FSDP"; TorchTitan's fully_shard /
// FSDP2): every parameter is sharded on dim 0 across the shard group (rows padded to a multiple
// of the group size); each transformer block is one unit and the rest of the model
// (embeddings, final norm, output) the root unit. Before a unit's forward its parameters are
// all-gathered in the param dtype; gradients are reduce-scattered in the reduce dtype and, for
// HSDP, all-reduced across replicas. The collectives are one autograd function (all-gather
// forward, reduce-scatter backward), so other parallelisms compose through ordinary autograd.
// Shard degree 1 with replicas is DDP; a world of one is plain training. Compile mode adds
// SimpleFSDP's overlap (Zhang et al. 2024): the next unit's all-gather runs while this one
// computes, and gradient reductions run while backward goes on.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "titan/distributed/process_group.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/weight_module.h"

namespace titan::distributed {

struct FsdpOptions {
  torch::ScalarType param_dtype = torch::kFloat;   // training.mixed_precision_param
  torch::ScalarType reduce_dtype = torch::kFloat;  // training.mixed_precision_reduce
  /// Free a block's gathered parameters after its forward and gather them again before its
  /// backward (parallelism.fsdp_reshard_after_forward: default/always = true, never = false).
  /// The root unit is never resharded (it runs last in forward and first in backward).
  bool reshard_after_forward = true;
  /// Overlap communication with compute (compile mode): each block's all-gather starts while
  /// the unit before it computes (in forward the previous block, or the root for a part's first
  /// block; in backward, when blocks reshard after forward, the next block), and a unit's
  /// gradient reduce-scatter (and HSDP all-reduce) runs while the next unit's backward
  /// computes; Fsdp::finish_gradients() adds them to the shards' gradients. The same
  /// collectives in the same order on every rank (backward issues an all-gather before the
  /// reduce-scatter eager issues first), so the values are eager's.
  bool overlap = false;
};

class FsdpUnit;

/// What the units of one Fsdp share.
struct FsdpShared {
  std::vector<FsdpUnit*> reducing;  // units whose gradients are still in flight, oldest first
  double wait_seconds = 0;          // time this rank waited on the units' collectives
};

/// One sharded parameter of a unit.
struct FsdpParam {
  models::WeightModule* module = nullptr;
  torch::Tensor shard;              // the registered parameter: [shard_rows, ...] fp32, padded
  std::vector<int64_t> full_shape;  // unpadded global shape
  int64_t shard_rows = 0;           // rows per rank (padded rows / group size)
  std::string name;                 // fully qualified name in the model
};

/// A set of parameters gathered and reduced together.
class FsdpUnit {
 public:
  FsdpUnit(std::vector<FsdpParam> params, std::shared_ptr<ProcessGroup> shard_group,
           std::shared_ptr<ProcessGroup> replicate_group, FsdpOptions options, std::string name,
           std::shared_ptr<FsdpShared> shared);

  /// All-gathers the full parameters (autograd-connected to the shards), puts them in the
  /// modules' weight handles and returns them ([padded rows, ...] each).
  std::vector<torch::Tensor> gather();
  /// Puts the shards back into the weight handles. With `free_storage`, also frees the memory
  /// of `gathered` (what gather() returned); regather(gathered) refills it, and the tensors
  /// autograd saved see the new data. Each forward's gathered tensors are its own, so several
  /// microbatches may be in flight (pipeline parallelism).
  void release(const std::vector<torch::Tensor>& gathered, bool free_storage);
  /// Refills `gathered` if release freed it (before the unit's backward); returns whether it
  /// did.
  bool regather(const std::vector<torch::Tensor>& gathered);
  /// Starts the all-gather that the unit's next gather() or regather() takes over (the shards
  /// must not change before; nothing when one is already in flight).
  void prefetch();
  /// Waits for and discards a prefetched all-gather nobody took.
  void drop_prefetch();
  /// Whether a prefetched all-gather is in flight.
  bool prefetching() const { return prefetched_.active(); }

  const std::vector<FsdpParam>& params() const { return params_; }
  const FsdpOptions& options() const { return options_; }
  ProcessGroup& shard_group() { return *shard_group_; }
  ProcessGroup* replicate_group() { return replicate_group_.get(); }

  /// Flat shard [n] -> per-parameter full tensors in the param dtype (no autograd); the shards
  /// themselves when aliases_shards().
  std::vector<torch::Tensor> all_gather_full(const std::vector<torch::Tensor>& shards);
  /// A shard group of one and no cast: gather() hands out the shards themselves (no copy, no
  /// communication, nothing freed), as plain training (a world of one) and DDP need.
  bool aliases_shards() const { return aliases_shards_; }
  /// The gradient step of the unit's backward: per-parameter full gradients -> what autograd
  /// gives the shards. In a world of one the gradients themselves; under overlap nothing
  /// (start_reduce_scatter); else reduce_scatter_grads.
  std::vector<torch::Tensor> reduce_grads(const std::vector<torch::Tensor>& full_grads);
  /// Per-parameter full gradients -> per-parameter shard gradients (fp32): reduce-scatter in
  /// the reduce dtype over the shard group, then all-reduce over the replicas.
  std::vector<torch::Tensor> reduce_scatter_grads(const std::vector<torch::Tensor>& full_grads);
  /// reduce_scatter_grads without waiting (overlap): the shard gradients are added to the
  /// shards' .grad by finish_gradients(). Advances the other units' reductions in flight first.
  void start_reduce_scatter(const std::vector<torch::Tensor>& full_grads);
  /// Waits for this unit's reduce-scatter in flight, if any; with replicas, starts the
  /// all-reduce, else adds the result to the shards' gradients.
  void finish_reduce_scatter();
  /// Waits for all of this unit's gradient reduction in flight and adds the result to the
  /// shards' gradients.
  void finish_gradients();

 private:
  /// Starts the all-gather of `shards` (flat, in the param dtype).
  PendingWork start_all_gather(const std::vector<torch::Tensor>& shards);
  /// Finishes `pending` on `group`, counting the wait in the shared wait_seconds.
  torch::Tensor wait_for(PendingWork& pending, ProcessGroup& group);
  /// Full gradients -> [size * n] in the reduce dtype, each rank's rows together.
  torch::Tensor pack_grads(const std::vector<torch::Tensor>& full_grads) const;
  /// This rank's reduced [n] -> per-parameter shard gradients in the shards' dtype.
  std::vector<torch::Tensor> split_shard_grads(const torch::Tensor& reduced) const;
  void add_to_grads(const torch::Tensor& reduced);
  bool has_replicas() const { return replicate_group_ && replicate_group_->size() > 1; }

  std::vector<FsdpParam> params_;
  std::shared_ptr<ProcessGroup> shard_group_;
  std::shared_ptr<ProcessGroup> replicate_group_;  // null or size 1: no replicas
  FsdpOptions options_;
  std::string name_;
  std::shared_ptr<FsdpShared> shared_;
  PendingWork prefetched_;  // an all-gather started by prefetch()
  PendingWork reducing_;    // the gradient reduce-scatter, or after it the HSDP all-reduce
  bool all_reducing_ = false;
  bool aliases_shards_ = false;
};

/// Weights sharded over another group than the rest of their block: expert parallelism's
/// experts, over the efsdp ranks that hold the same experts (TorchTitan's sparse mesh).
struct FsdpExpertGroup {
  std::shared_ptr<ProcessGroup> shard_group;
  std::vector<models::WeightModule*> modules;
};

/// FSDP applied to a model: the units and what the trainer and checkpoints need from them.
class Fsdp {
 public:
  /// Shards `model`'s parameters in place (each rank keeps its rows) and installs the unit
  /// wrappers around the blocks and the whole forward. `shard_group` may have size 1 (DDP
  /// when `replicate_group` has more ranks). A block's weights in `experts` form a unit of
  /// their own over its group, gathered and released with the block. Call after activation
  /// checkpointing is applied.
  static std::shared_ptr<Fsdp> apply(models::CausalLM& model,
                                     std::shared_ptr<ProcessGroup> shard_group,
                                     std::shared_ptr<ProcessGroup> replicate_group,
                                     FsdpOptions options, const FsdpExpertGroup& experts = {});

  /// The sharded parameters (what the optimizer updates), in a fixed order.
  std::vector<torch::Tensor> parameters() const;
  /// The units: each block's (its experts' after it) in order, the root last.
  const std::vector<std::shared_ptr<FsdpUnit>>& units() const { return units_; }
  /// Sum over parameters() of weights[i] * ||grad_i||^2 (float64), over the shards of the
  /// shard group (replicas hold identical values and are counted once). The square root is
  /// the gradient norm when all weights are 1; tensor parallelism weights its replicated
  /// parameters by 1 / tp and sums over its group too (collective over the shard group; the
  /// expert units' shards are distinct over shard group x tp, which spans ep x efsdp).
  double grad_sq_sum(const std::vector<double>& weights);
  /// `tensors` (one per parameter, in parameters() order, same shapes as the shards) as
  /// ShardedTensors under `prefix` + name, e.g. the optimizer's moments.
  ShardedStateDict shard_view(const std::vector<torch::Tensor>& tensors,
                              const std::string& prefix) const;
  /// After the step's backward passes: waits for the gradient reductions still in flight
  /// (FsdpOptions::overlap) and adds them to the shards' gradients; drops prefetches nobody
  /// took, so none outlives the step's weights.
  void finish_gradients();
  /// Seconds this rank waited on FSDP's collectives since the last call (and zeroes it): the
  /// communication that compute did not hide.
  double take_wait_seconds() { return std::exchange(shared_->wait_seconds, 0.0); }

 private:
  std::vector<std::shared_ptr<FsdpUnit>> units_;  // blocks in order, root last
  std::shared_ptr<FsdpShared> shared_ = std::make_shared<FsdpShared>();
};

}  // namespace titan::distributed
