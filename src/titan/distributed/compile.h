// Compile mode (compile.enable; TorchTitan's apply_compile, which runs torch.compile on each
// block and the loss): titan's fused path, done by hand. compile.components selects
//   "model": the fused kernels in place of the eager compositions (models/common/kernels/:
//            RMSNorm, including Qwen3's q/k norms and MLA's latent norms, the residual add
//            with the norm after it, RoPE on q and k, causal attention, and the SwiGLU gate of
//            the feed-forward networks and the routed experts), and FSDP's communication
//            overlapped with compute (SimpleFSDP's prefetch and asynchronous reductions,
//            FsdpOptions::overlap);
//   "loss":  the output projection fused with the cross-entropy, the logits never whole
//            (distributed/linear_cross_entropy.h).
// Either way, planned buffers: CPU storage is cached by size class and reused (platform/
// allocation_cache.h), so steps after the first take none from the system.
// Eager stays the reference: compile mode changes speed and memory, not the model.
#pragma once

#include <string>

#include "titan/config/job_config.h"
#include "titan/distributed/model_part.h"

namespace titan::distributed {

/// Whether compile mode is on for `component` ("model" or "loss").
bool compiles(const config::CompileSection& compile, const std::string& component);

/// Start check: the "model" component's kernels are CPU loops; throws ConfigError naming
/// compile.components when GPUs are visible.
void check_compile(const config::CompileSection& compile);

/// With compile.enable: `part` computes with the components compile.components names. Call
/// after activation checkpointing (the fused kernels replace op-level recomputation, keeping
/// no more than it does) and before FSDP.
void apply_compile(ModelPart& part, const config::CompileSection& compile);

}  // namespace titan::distributed
