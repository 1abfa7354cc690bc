// Per-rank parameter count and memory estimate of a training layout, computed from a
// shape-only (meta-device) model without allocating it: what each rank holds under FSDP, tensor
// parallelism and activation checkpointing. The fake-backend dry run prints it; a `titan plan`
// can reuse it for other device profiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/models/common/causal_lm.h"

namespace titan::tools {

/// Bytes one rank holds at its peak (the backward of the first block), by kind.
struct MemoryEstimate {
  /// Parameter shards in fp32 (the master copy the optimizer updates).
  double params = 0;
  /// Gradient shards in fp32 (mixed_precision_reduce) after the reduce-scatter.
  double grads = 0;
  /// AdamW exp_avg and exp_avg_sq: 2 fp32 tensors per parameter shard.
  double optimizer = 0;
  /// FSDP working set: the root unit's gathered parameters (kept through forward and backward)
  /// and the largest block's, in mixed_precision_param, plus that block's unsharded gradients
  /// (mixed_precision_reduce) before the reduce-scatter; with fsdp_reshard_after_forward =
  /// "never", every block's gathered parameters stay. 0 without FSDP.
  double gathered = 0;
  /// Activations saved for backward by all blocks under the activation-checkpointing mode, plus
  /// one block's full set while it is recomputed (see activation_elements_per_token_layer).
  double activations = 0;
  /// Output logits of one micro-batch (compute dtype) and the fp32 copy the loss takes; under
  /// compile mode's fused loss, one chunk's logits and the hidden-state (compute dtype) and
  /// weight (fp32) gradients it keeps from forward to backward. 0 in a pipeline stage without
  /// the output.
  double logits = 0;

  double total() const { return params + grads + optimizer + gathered + activations + logits; }
};

/// The plan of one layout. Parameter counts are elements; sharded counts round up (FSDP pads a
/// parameter to a multiple of its degree; the padding to whole rows is ignored).
struct LayoutPlan {
  int64_t total_params = 0;      // whole model, tied tensors counted once
  int64_t embedding_params = 0;  // token embedding
  /// After tensor parallelism (2-D weights: attention and FFN matrices, vocab-parallel
  /// embedding and output, divided by tp; norm weights replicated) and FSDP (every parameter
  /// divided by dp_shard x cp).
  int64_t params_per_rank = 0;
  /// Of them, the routed experts' (mixture-of-experts layers; replicated across tp, sharded by
  /// FSDP on the expert dimension; with expert parallelism 1/ep of them, sharded over efsdp).
  int64_t expert_params_per_rank = 0;
  /// Expert parallelism: bytes this rank sends by all-to-all in one step (each routed copy of
  /// its tokens leaving for another rank's expert and coming back, forward and backward).
  int64_t all_to_all_bytes_per_step = 0;
  /// Parameters after tensor parallelism of FSDP's root unit (embedding, final norm, output;
  /// never resharded, fsdp.h) and of its largest block unit "layers.N".
  int64_t root_unit_params = 0;
  std::string largest_block;
  int64_t largest_block_params = 0;
  /// Tokens in one micro-batch on one rank: local_batch_size (or the pipeline's microbatch
  /// size) x seq_len / cp.
  int64_t tokens_per_rank = 0;
  /// Micro-batches whose activations are held at the peak (a pipeline schedule's; else 1).
  int64_t in_flight = 1;
  /// Dtype of gathered parameters and activations: mixed_precision_param under FSDP, float32
  /// otherwise (TorchTitan applies mixed precision through FSDP only).
  std::string compute_dtype;
  /// Elements the largest block saves per token for backward without checkpointing, before
  /// the division by tp (each part lists its tensors: models/common/block_part.h and its
  /// implementations), and with op-level selective checkpointing.
  int64_t activation_elements_per_token_layer = 0;
  int64_t op_sac_elements_per_token_layer = 0;
  /// "none", "full", "selective op", "selective, every 2 block(s)".
  std::string activation_checkpointing;
  /// tp > 1 without parallelism.disable_sequence_parallel: the norm and residual-stream
  /// activations are split by tp too.
  bool sequence_parallel = false;
  MemoryEstimate memory;  // bytes per rank
  /// What the estimate leaves out for this layout.
  std::vector<std::string> caveats;
};

/// What a pipeline stage runs at once; the defaults plan a model without a pipeline.
struct StageLoad {
  int64_t sequences = 0;  // per micro-batch; 0: training.local_batch_size
  int64_t in_flight = 1;  // micro-batches whose activations are held at the peak
};

/// Plans `job` on the mesh `dims` for `model` (the whole model, or one pipeline stage's part
/// running `load`), whose parameters may live on torch::kMeta.
/// Throws ConfigError when activation_checkpoint.selective_ac_option is neither "op" nor a
/// positive integer.
///
/// Activations follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
/// Transformer Models" (per layer 34*s*b*h + 5*a*s^2*b bytes for a 16-bit GPT block), redone
/// by each block part for itself (RMSNorm, grouped-query attention, SwiGLU, no dropout;
/// attention keeps no s x s scores: chunked / flash-style, recomputed in backward). Tensor
/// parallelism divides the tensors between the column- and row-parallel projections by tp;
/// those of the norms and the residual stream are divided by tp only with sequence
/// parallelism.
LayoutPlan plan_layout(models::CausalLM& model, const config::JobConfig& job,
                       const distributed::ParallelDims& dims, const StageLoad& load = {});

/// Bytes per element of a training.mixed_precision_* value ("bfloat16" 2, "float32" 4);
/// throws ConfigError for any other name.
int64_t dtype_bytes(const std::string& dtype);

}  // namespace titan::tools
