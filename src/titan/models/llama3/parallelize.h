// parallelize_llama3: TorchTitan's models/llama3/infra/parallelize.py as a fixed-order list of
// apply_* steps on one model part.
#pragma once

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::models::llama3 {

/// Applies, in order: tensor parallelism (the common Transformer's plan,
/// tensor_parallel_plan.h), context parallelism, activation checkpointing, compile, FSDP /
/// HSDP / DDP (a pipeline stage's part gets the same). Throws ConfigError when the model does
/// not divide over tp.
void parallelize_llama3(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                        const distributed::DeviceMesh& mesh, const config::JobConfig& job);

}  // namespace titan::models::llama3
