// The dimensions of the device mesh, one table that everything listing them reads: the mesh
// (distributed/parallel_dims.h, distributed/device_mesh.h), data_parallel_shard_degree = -1's
// rule (resolve.h), the layout line, `titan plan`'s labels and search (train/layout_search.h)
// and the tuning keys `titan launch` looks for. Order: TorchTitan's mesh [pp, dp_replicate,
// dp_shard, cp, tp], tp varying fastest. (Expert parallelism is not a dimension of its own: it
// borrows the ranks of dp_shard x cp x tp, parallel_dims.h.)
#pragma once

#include <array>
#include <cstdint>

#include "titan/config/job_config.h"

namespace titan::config {

enum class MeshDim { PP = 0, DpReplicate = 1, DpShard = 2, CP = 3, TP = 4 };

struct MeshDimSpec {
  MeshDim dim;
  const char* name;                     // the mesh's name for it: "dp_shard"
  const char* key;                      // its degree's key under parallelism.
  int64_t ParallelismSection::*degree;  // that key's field
  const char* label;                    // titan plan's layout label: "fsdp" (as in "fsdp16")
  /// Model parallelism: a degree above 1 makes a run a tuning run, to be compared against the
  /// validated 1D FSDP baseline (data parallelism alone keeps that baseline's curve).
  bool model_parallel;
};

/// Every dimension, in mesh order.
inline constexpr std::array<MeshDimSpec, 5> kMeshDims = {{
    {MeshDim::PP, "pp", "pipeline_parallel_degree", &ParallelismSection::pipeline_parallel_degree,
     "pp", true},
    {MeshDim::DpReplicate, "dp_replicate", "data_parallel_replicate_degree",
     &ParallelismSection::data_parallel_replicate_degree, "replicate", false},
    {MeshDim::DpShard, "dp_shard", "data_parallel_shard_degree",
     &ParallelismSection::data_parallel_shard_degree, "fsdp", false},
    {MeshDim::CP, "cp", "context_parallel_degree", &ParallelismSection::context_parallel_degree,
     "cp", true},
    {MeshDim::TP, "tp", "tensor_parallel_degree", &ParallelismSection::tensor_parallel_degree, "tp",
     true},
}};

inline const MeshDimSpec& mesh_dim(MeshDim dim) { return kMeshDims[static_cast<int>(dim)]; }

}  // namespace titan::config
