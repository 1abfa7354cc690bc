// How a rank's piece of a global tensor is described to checkpointing: the local rows of a
// dim-0 shard (FSDP), or a whole replicated tensor (DDP / HSDP replicas), with a flag saying
// which rank writes it so replicas are stored once.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::components::checkpoint {

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

}  // namespace titan::components::checkpoint
