// Expert parallelism (Lepikhin et al. 2020, "GShard"; TorchTitan's ExpertParallel): the E
// routed experts of every MoE layer are split across the mesh's `ep` group, rank r holding
// experts [r E / ep, (r + 1) E / ep). Each rank routes its own tokens; the copies travel to the
// ranks of their experts and back by all-to-all with variable split sizes:
//   1. all-to-all of the per-expert counts (every rank learns what it will receive),
//   2. all-to-all of the copies (sorted by expert, so by destination rank),
//   3. a permutation from source-rank-major to local-expert-major order, the grouped GEMM,
//   4. the inverse permutation and the reverse all-to-all.
// Both all-to-alls are autograd functions (collectives.h): a copy's gradient returns to the
// rank that sent it, and each expert's weight gradient sums over every rank's tokens. The shared
// experts compute while the copies travel out, and their backward runs while the copies'
// gradients travel back (the collective is asynchronous on Gloo and NCCL).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "titan/distributed/process_group.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/moe.h"

namespace titan::distributed {

/// Dispatch and combine over the `ep` group for a layer of `num_experts` experts (divisible by
/// the group size).
class AllToAllDispatcher : public models::TokenDispatcher {
 public:
  AllToAllDispatcher(std::shared_ptr<ProcessGroup> ep_group, int64_t num_experts);

  std::pair<torch::Tensor, std::vector<int64_t>> dispatch(
      const torch::Tensor& routed, const std::vector<int64_t>& counts,
      const std::function<void()>& during) override;
  torch::Tensor combine(const torch::Tensor& expert_out) override;

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t local_experts_;
  // The latest dispatch: rows sent to / received from each rank, and the order that makes the
  // received rows local-expert-major ([M] int64: position i holds received row order_[i]).
  std::vector<int64_t> sent_, received_;
  torch::Tensor order_;
};

/// Keeps rows [rank E / ep, (rank + 1) E / ep) of each of `moe`'s expert weights [E, ...] and
/// gives it an AllToAllDispatcher over `ep_group`. Throws ConfigError naming the numbers when
/// ep does not divide E.
void shard_experts(models::MoEImpl& moe, std::shared_ptr<ProcessGroup> ep_group);

/// Expert parallelism applied to a model part: which weights it split, their checkpoint
/// coordinates, and the time its all-to-alls took.
class ExpertParallel {
 public:
  /// shard_experts on every MoE layer of `model` over `ep_group`.
  ExpertParallel(models::CausalLM& model, std::shared_ptr<ProcessGroup> ep_group);

  /// The expert weights, this rank's experts only (FSDP shards them over the efsdp group).
  const std::vector<models::WeightModule*>& modules() const { return modules_; }
  /// Pieces named `prefix` + parameter name (Fsdp::shard_view) with the expert weights' rows
  /// moved to the whole model's expert coordinates; the others unchanged.
  ShardedStateDict to_global(ShardedStateDict pieces, const std::string& prefix) const;
  /// Seconds the all-to-alls (forward and backward, every layer's) kept this rank waiting since
  /// the last call: the part the shared experts' compute did not hide.
  double take_seconds() { return group_->take_blocked_seconds(); }

 private:
  std::shared_ptr<ProcessGroup> group_;
  std::vector<models::WeightModule*> modules_;
  std::set<std::string> names_;
};

}  // namespace titan::distributed
