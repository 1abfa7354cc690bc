// The process groups of the parallel layout, by TorchTitan's mesh names, built from
// ParallelDims: each rank creates only the groups it belongs to.
//   pp, dp_replicate, dp_shard, cp, tp  one mesh dimension each (config/mesh_dims.h)
//   dp            dp_replicate x dp_shard: ranks that read different batches
//   dp_shard_cp   dp_shard x cp: FSDP shards parameters over it
//   loss          dp_replicate x dp_shard x cp: the loss, its token count and metrics
//   ep, efsdp     with expert parallelism only: the sparse mesh's expert-parallel and
//                 expert-FSDP groups (parallel_dims.h)
// A dimension of degree 1 is a group of this rank alone, on which every collective is free.
#pragma once

#include <array>
#include <memory>

#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/process_group.h"

namespace titan::distributed {

/// The groups above; the first five are the mesh dimensions, in MeshDim's order.
enum class MeshGroup { PP, DpReplicate, DpShard, CP, TP, Dp, DpShardCp, Loss, EP, EFsdp };

/// The mesh's name for `group` ("dp_shard_cp"): the process group's name in logs and errors.
const char* mesh_group_name(MeshGroup group);

class DeviceMesh {
 public:
  /// Creates this rank's group of every mesh name above (collective over each group's members).
  static DeviceMesh build(const ParallelDims& dims, World& world);

  /// This rank's `group`; throws std::out_of_range naming it if there is none (ep and efsdp
  /// without expert parallelism).
  std::shared_ptr<ProcessGroup> operator[](MeshGroup group) const;

 private:
  std::array<std::shared_ptr<ProcessGroup>, 10> groups_;
};

}  // namespace titan::distributed
