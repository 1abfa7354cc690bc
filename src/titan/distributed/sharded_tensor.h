// How a rank's piece of a global tensor is described to checkpointing: the local rows of a
// dim-0 shard (FSDP), or a whole replicated tensor (DDP / HSDP replicas), with a flag saying
// which rank writes it so replicas are stored once.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::distributed {

struct ShardedTensor {
  /// This rank's rows [row_offset, row_offset + local.size(0)) of the global tensor (for a
  /// 0-dim global tensor: the whole value). May have 0 rows. Contiguous, CPU.
  torch::Tensor local;
  std::vector<int64_t> global_shape;
  int64_t row_offset = 0;
  /// False on ranks whose piece is a replica that another rank writes.
  bool writer = true;
};

/// Fully qualified name ("layers.0.attention.wq.weight", "optimizer.exp_avg.<fqn>") -> piece.
using ShardedStateDict = std::map<std::string, ShardedTensor>;

/// Rows of a global tensor along dim 0; a 0-dim tensor counts as one row.
int64_t global_rows(const std::vector<int64_t>& global_shape);

/// Elements in one row (the product of dims 1..n-1; 1 for 0- and 1-dim tensors).
int64_t row_numel(const std::vector<int64_t>& global_shape);

/// Rows `piece.local` holds (1 for a 0-dim global tensor).
int64_t local_rows(const ShardedTensor& piece);

/// A piece of the whole of `t` (row_offset 0, writer true): how a rank with unsharded tensors,
/// or a tool with a full model, describes them.
ShardedTensor whole(const torch::Tensor& t);

/// Throws CheckpointError naming `name` unless `piece.local` is defined, has the global shape's
/// dims 1..n-1 (numel 1 for a 0-dim global tensor), and its rows lie inside the global rows.
void check_piece(const std::string& name, const ShardedTensor& piece);

}  // namespace titan::distributed
