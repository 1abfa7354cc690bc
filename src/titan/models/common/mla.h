// Multi-head latent attention (DeepSeek-AI 2024, "DeepSeek-V2", arXiv:2405.04434; DeepSeek-V3,
// arXiv:2412.19437; TorchTitan's deepseek_v3 Attention): keys and values come from one
// low-rank latent per token (wkv_a -> kv_norm -> wkv_b, one key and one value per head), queries
// from x directly (wq) or through their own low-rank latent (wq_a -> q_norm -> wq_b). Each
// query/key head is a qk_nope_head_dim part without positions and a qk_rope_head_dim part with
// RoPE (pairs 2i, 2i+1), the keys' rope part one for all heads, cut from wkv_a's output before
// kv_norm; values are v_head_dim wide. The softmax scale is qk_head_dim^-0.5, times YaRN's
// mscale^2 when the RoPE uses YaRN. Module names are TorchTitan's.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "titan/models/common/block_part.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/module_hooks.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/rope.h"

namespace titan::models {

struct MLAArgs {
  int64_t q_lora_rank = 0;  // 0: queries straight from x (wq)
  int64_t kv_lora_rank = 512;
  int64_t qk_nope_head_dim = 128;
  int64_t qk_rope_head_dim = 64;
  int64_t v_head_dim = 128;
  /// YaRN's attention mscale coefficient (HF rope_scaling.mscale_all_dim): with YaRN factor s,
  /// the softmax scale is multiplied by (0.1 mscale ln s + 1)^2.
  double mscale = 1.0;
  double latent_norm_eps = 1e-6;  // q_norm and kv_norm (Hugging Face's fixed default)

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  /// qk_head_dim^-0.5, with YaRN's mscale^2 when `yarn` is set.
  double softmax_scale(const std::optional<YarnScaling>& yarn) const;
};

/// Throws ConfigError naming the field for non-positive widths, an odd qk_rope_head_dim or a
/// negative q_lora_rank.
void validate(const MLAArgs& args);

class MultiHeadLatentAttentionImpl : public AttentionPart {
 public:
  /// wq [H * qk_head_dim, dim] (q_lora_rank 0) or wq_a [q_lora_rank, dim], q_norm, wq_b
  /// [H * qk_head_dim, q_lora_rank]; wkv_a [kv_lora_rank + qk_rope_head_dim, dim], kv_norm,
  /// wkv_b [H * (qk_nope_head_dim + v_head_dim), kv_lora_rank]; wo [dim, H * v_head_dim].
  /// Uninitialised (norms: ones). Throws as validate(args).
  MultiHeadLatentAttentionImpl(int64_t dim, int64_t n_heads, const MLAArgs& args,
                               double softmax_scale, const torch::TensorOptions& options);

  /// x: [B, S, dim]; cos, sin: [S, qk_rope_head_dim] (rope_cos_sin) -> [B, S, dim]. Causal.
  /// `hooks` run on x and on the output of wo (tensor parallelism).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) override;

  /// The heads (wq / wq_b and wkv_b column-parallel, wo row-parallel).
  std::vector<ShardedSize> tensor_parallel_sizes() const override;
  /// Between the column- and row-parallel projections, per head: q and k after RoPE (2 x
  /// qk_head_dim), v, the wo input (2 x v_head_dim) and the log-sum-exp; in the sequence region
  /// the latents and their norms' inputs (kv_lora_rank + qk_rope_head_dim, + q_lora_rank, x 2
  /// without op-level checkpointing, which recomputes the norms).
  SavedElements saved_elements(bool op_level) const override;
  /// Keys expanded to every head (qk_head_dim) and values (v_head_dim).
  int64_t key_value_elements() const override;
  /// 6 x parameters + 6 x heads x (qk_head_dim + v_head_dim) x seq_len.
  int64_t flops_per_token(int64_t seq_len) const override;
  /// q_norm's (with a q latent) and kv_norm's.
  std::vector<ElementwiseOp*> recomputed_ops() override;

  int64_t n_heads;  // this rank's (tensor parallelism divides it)
  MLAArgs args;
  double softmax_scale;
  Linear wq{nullptr}, wq_a{nullptr}, wq_b{nullptr};  // wq, or wq_a and wq_b
  RMSNorm q_norm{nullptr};                            // with wq_a only
  Linear wkv_a{nullptr}, wkv_b{nullptr}, wo{nullptr};
  RMSNorm kv_norm{nullptr};
  ModuleHooks hooks;
};
TORCH_MODULE(MultiHeadLatentAttention);

}  // namespace titan::models
