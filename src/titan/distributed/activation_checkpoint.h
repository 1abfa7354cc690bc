// Activation checkpointing of transformer blocks (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost"; TorchTitan's apply_ac): a checkpointed block keeps only its input in
// forward and runs again in backward to rebuild its activations. Op-level selective
// checkpointing (selective_ac_option = "op") instead keeps every matmul's output (and the
// attention's) and recomputes the cheap elementwise ops between them in backward: the RMSNorms
// and the SwiGLU gate (Korthikanti et al. 2022, arXiv:2205.05198, selective recomputation).
// Gradients are identical to training without it (the same ops run on the same values).
#pragma once

#include "titan/config/job_config.h"
#include "titan/models/common/causal_lm.h"

namespace titan::distributed {

/// True when block `layer` (0-based) is checkpointed as a whole under `ac`: every block for
/// mode "full", every N-th block (layers N-1, 2N-1, ...) for mode "selective" with
/// selective_ac_option N, none for "none" or op-level selective checkpointing.
bool is_checkpointed(const config::ActivationCheckpointSection& ac, int64_t layer);

/// Installs checkpointing around `model`'s blocks per `ac`. Call before FSDP (TorchTitan's
/// order), so that the weights a block used in forward (FSDP's gathered ones) are the ones it
/// recomputes with.
void apply_activation_checkpointing(models::CausalLM& model,
                                    const config::ActivationCheckpointSection& ac);

}  // namespace titan::distributed
