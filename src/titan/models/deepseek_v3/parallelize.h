// parallelize_deepseek_v3: TorchTitan's models/deepseek_v3/infra/parallelize.py as a fixed-order
// list of apply_* steps on one model part.
#pragma once

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::models::deepseek_v3 {

/// Applies, in order: tensor parallelism (the common Transformer's plan: MLA's heads split, the
/// experts replicated), context and expert parallelism, activation checkpointing, compile,
/// FSDP / HSDP / DDP. Throws ConfigError when the model does not divide over tp.
void parallelize_deepseek_v3(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                             const distributed::DeviceMesh& mesh, const config::JobConfig& job);

}  // namespace titan::models::deepseek_v3
