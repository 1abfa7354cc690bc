// The process groups of the parallel layout, by TorchTitan's mesh names, built from
// ParallelDims: each rank creates only the groups it belongs to.
//   pp, dp_replicate, dp_shard, cp, tp  one mesh dimension each
//   dp            dp_replicate x dp_shard: ranks that read different batches
//   dp_shard_cp   dp_shard x cp: FSDP shards parameters over it
//   loss          dp_replicate x dp_shard x cp: the loss, its token count and metrics
//   ep, efsdp     with expert parallelism only: the sparse mesh's expert-parallel and
//                 expert-FSDP groups (parallel_dims.h)
// A dimension of degree 1 is a group of this rank alone, on which every collective is free.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/process_group.h"

namespace titan::distributed {

class DeviceMesh {
 public:
  /// Creates this rank's group of every mesh name above (collective over each group's members).
  static DeviceMesh build(const ParallelDims& dims, World& world);

  /// This rank's group named `name`; throws std::out_of_range naming it if there is none.
  std::shared_ptr<ProcessGroup> operator[](const std::string& name) const;

 private:
  std::map<std::string, std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace titan::distributed
