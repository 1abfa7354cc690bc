// parallelize_transformer: TorchTitan's models/<family>/infra/parallelize.py for every family
// built on the common Transformer, a fixed-order list of apply_* steps on one model part.
#pragma once

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::models {

/// Applies, in order: tensor parallelism (the common Transformer's plan,
/// tensor_parallel_plan.h), context parallelism, expert parallelism (MoE layers only; the
/// trainer refuses parallelism.expert_parallel_degree > 1 for a model without them),
/// activation checkpointing, compile, FSDP / HSDP / DDP (a pipeline stage's part gets the same).
/// Throws ConfigError when the model does not divide over tp.
void parallelize_transformer(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                             const distributed::DeviceMesh& mesh, const config::JobConfig& job);

}  // namespace titan::models
