// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053) with sequence
// parallelism (Korthikanti et al. 2022, arXiv:2205.05198) and loss parallelism, on the mesh's
// `tp` dimension; TorchTitan's ColwiseParallel / RowwiseParallel / SequenceParallel /
// loss_parallel as explicit steps. A model family's plan (e.g.
// models/common/infra/tensor_parallel_plan.h) calls these on a whole, initialised model; each keeps
// this rank's slice of a weight in place:
//   colwise    rows [r * n / tp, (r + 1) * n / tp) of a [n, in] weight (q/k/v, gate/up
//              projections; the vocab-parallel embedding and output),
//   rowwise    columns of the same range of a [out, n] weight (output and down projections),
//   replicate  the whole weight (norms), noting whether ranks see different data for it.
// Between a region's column- and row-parallel projections activations are sharded by heads or
// by FFN columns; outside, with sequence parallelism, by the sequence (dim 1) and otherwise
// whole on every rank. FSDP then shards each rank's slices on dim 0 (2D: TP x FSDP / HSDP).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "titan/distributed/process_group.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/weight_module.h"

namespace titan::distributed {

struct TensorParallelOptions {
  /// Norms and the residual stream sharded on the sequence (!parallelism.disable_sequence_parallel).
  bool sequence_parallel = true;
  /// Vocab-parallel logits and cross-entropy (!parallelism.disable_loss_parallel).
  bool loss_parallel = true;
};

/// Throws ConfigError naming the numbers unless `tp` divides every size the parts of `model`'s
/// blocks shard (models::BlockPart::tensor_parallel_sizes: heads, FFN width, ...) and its
/// vocabulary, and, with sequence parallelism, `seq_len`. `model` as built (e.g. on meta).
/// `seq_len_key` names the sequence length in the error.
void check_tensor_parallel(models::CausalLM& model, int tp, int64_t seq_len,
                           bool sequence_parallel, const char* seq_len_key = "training.seq_len");

class TensorParallel {
 public:
  /// Elsewhere: another mesh dimension splits it (expert parallelism); tp leaves it alone.
  enum class Layout { Replicate, Rows, Columns, Elsewhere };

  /// `group`: the tp mesh dimension (size 1: every function below is the identity).
  TensorParallel(std::shared_ptr<ProcessGroup> group, TensorParallelOptions options);

  int size() const { return group_->size(); }
  int rank() const { return group_->rank(); }
  ProcessGroup& group() { return *group_; }
  const TensorParallelOptions& options() const { return options_; }

  // Plan steps. Each throws ConfigError when the sharded dimension is not divisible by size().
  /// Keeps rows [rank * n / size, (rank + 1) * n / size) of m.weight [n, ...].
  void colwise(models::WeightModule& m);
  /// Keeps the same range of columns of m.weight [out, n].
  void rowwise(models::WeightModule& m);
  /// Keeps m.weight whole. `partial_grads`: ranks use it on different data (sequence shards,
  /// head groups), so its gradient is summed over the group after backward.
  void replicate(models::WeightModule& m, bool partial_grads);
  /// Hands m.weight to another parallelism (expert parallelism, over ranks that include this
  /// group's): its gradient, norm and checkpoint pieces are then this rank's own.
  void exclude(models::WeightModule& m);
  /// Records the parameter names of `model` (call once the plan is applied).
  void finish(torch::nn::Module& model);

  // Region boundaries, as autograd functions (collectives.h).
  /// Into a column-parallel region: x [B, S / tp, D] all-gathered on the sequence with sequence
  /// parallelism, else x [B, S, D] as is (gradient all-reduced).
  torch::Tensor enter_region(const torch::Tensor& x);
  /// Out of a row-parallel region: partial sums [B, S, D] reduce-scattered on the sequence
  /// ([B, S / tp, D]) with sequence parallelism, else all-reduced.
  torch::Tensor leave_region(const torch::Tensor& y);
  /// Vocab-parallel logits [B, S, V / tp]: kept with loss parallelism, else gathered to
  /// [B, S, V].
  torch::Tensor logits(const torch::Tensor& local_logits);

  // Training.
  /// Sum over tokens of the cross-entropy of `logits` (as logits() returns them) against
  /// labels [B, S] int64: vocab-parallel with loss parallelism (loss_parallel.h).
  torch::Tensor loss_sum(const torch::Tensor& logits, const torch::Tensor& labels);
  /// Sums the gradients of the partial-gradient replicated parameters over the group (after
  /// backward, before clipping; collective).
  void reduce_partial_grads();
  /// Per parameter of `params` (in order): the factor of its squared gradient norm in a norm
  /// summed over the group (1 for a sharded parameter, 1 / size for a replicated one).
  std::vector<double> norm_weights(const std::vector<torch::Tensor>& params) const;

  // Checkpoints: pieces in the unsharded model's coordinates.
  /// `local`: this rank's pieces named `prefix` + parameter name, in the coordinates of its
  /// slices (Fsdp::shard_view). Returns them described in the whole model's coordinates for
  /// saving: row offsets of colwise slices shifted, rowwise slices all-gathered to full width
  /// (collective), replicated and rowwise ones written by rank 0 only.
  ShardedStateDict to_global(const ShardedStateDict& local, const std::string& prefix);
  /// As to_global, for loading into `local`'s tensors: load into the returned pieces, then
  /// finish_load() copies this rank's columns of the full-width rowwise pieces into place
  /// (pieces left unloaded keep their values; collective).
  ShardedStateDict for_load(const ShardedStateDict& local, const std::string& prefix);
  void finish_load();

 private:
  struct Placement {
    Layout layout = Layout::Replicate;
    bool partial_grads = false;
    torch::Tensor param;
  };
  void shard(models::WeightModule& m, int64_t dim, Layout layout);
  const Placement* placement_of(const std::string& key, const std::string& prefix) const;

  std::shared_ptr<ProcessGroup> group_;
  TensorParallelOptions options_;
  std::map<c10::TensorImpl*, Placement> by_param_;
  std::map<std::string, Placement> by_name_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pending_loads_;  // (full width, target)
};

}  // namespace titan::distributed
