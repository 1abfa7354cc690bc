// parallelize_qwen3: TorchTitan's models/qwen3/infra/parallelize.py as a fixed-order list of
// apply_* steps on one model part.
#pragma once

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::models::qwen3 {

/// Applies, in order: tensor parallelism (the common Transformer's plan, which also
/// replicates Qwen3's q_norm / k_norm over the head groups), context and expert parallelism,
/// activation checkpointing, compile, FSDP / HSDP / DDP (a pipeline stage's part gets the
/// same). Throws ConfigError when the model does not divide over tp.
void parallelize_qwen3(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                       const distributed::DeviceMesh& mesh, const config::JobConfig& job);

}  // namespace titan::models::qwen3
