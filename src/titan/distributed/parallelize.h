// The apply_* steps a family's parallelize function (TrainSpec::parallelize) calls, in
// TorchTitan's order, that are not the family's own plan: tensor parallelism's switch, context
// and expert parallelism, and FSDP / HSDP / DDP. (Activation checkpointing:
// activation_checkpoint.h; a family's tensor-parallel plan: e.g.
// models/common/infra/tensor_parallel_plan.h.)
#pragma once

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::distributed {

/// Turns tensor parallelism on for `part` over the mesh's tp group, with sequence and loss
/// parallelism as `parallelism` says; returns it for the family's plan.
TensorParallel& enable_tensor_parallel(ModelPart& part, const DeviceMesh& mesh,
                                       const config::ParallelismSection& parallelism);

/// With parallelism.context_parallel_degree > 1: `part`'s attention and RoPE work on this
/// rank's chunks of each sequence, the keys reached over the mesh's cp group as
/// parallelism.context_parallel_rotate_method says (context_parallel.h). Call after the
/// tensor-parallel plan.
void apply_context_parallel(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh,
                            const config::ParallelismSection& parallelism);

/// With parallelism.expert_parallel_degree > 1: splits the routed experts of `part`'s MoE layers
/// over the mesh's ep group, tokens dispatched to them by all-to-all (expert_parallel.h); FSDP
/// then shards the expert weights over efsdp. Call after the tensor-parallel plan.
void apply_expert_parallel(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh);

/// Whether FSDP frees a block's gathered parameters after its forward:
/// parallelism.fsdp_reshard_after_forward "always", or "default" without pipeline parallelism
/// (as TorchTitan: under it, every microbatch's backward would gather them again).
bool reshard_after_forward(const config::ParallelismSection& parallelism,
                           const ParallelDims& dims);

/// Shards `part`'s parameters over the mesh's dp_shard_cp group, all-reducing gradients across
/// dp_replicate (HSDP); a shard group of one rank is DDP across the replicas, and a world of
/// one is plain training. Parameters are gathered in training.mixed_precision_param when they
/// are sharded (as TorchTitan), gradients reduced in float32. Call last.
void apply_fsdp(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh,
                const config::JobConfig& job);

}  // namespace titan::distributed
