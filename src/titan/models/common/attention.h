// Multi-head self-attention with grouped-query key/value heads (Ainslie et al. 2023, "GQA",
// arXiv:2305.13245), rotary positions (rope.h), optional per-head RMSNorm on q and k (Qwen3),
// and a head_dim independent of dim / n_heads. TorchTitan's Attention module names: wq, wk,
// wv, wo, q_norm, k_norm.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/block_part.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/module_hooks.h"
#include "titan/models/common/rmsnorm.h"

namespace titan::models {

struct AttentionOptions {
  int64_t dim = 0;
  int64_t n_heads = 0;     // this rank's query heads (all of them without tensor parallelism)
  int64_t n_kv_heads = 0;  // this rank's key/value heads; divides n_heads
  int64_t head_dim = 0;
  bool qk_norm = false;    // RMSNorm over head_dim on each q and k head, before RoPE
  double norm_eps = 1e-5;  // epsilon of q_norm / k_norm
};

class AttentionImpl : public AttentionPart {
 public:
  /// wq: [H*Dh, dim]; wk, wv: [Hkv*Dh, dim]; wo: [dim, H*Dh]; q_norm, k_norm: [Dh] when
  /// qk_norm. Throws ConfigError if n_heads is not a positive multiple of n_kv_heads.
  AttentionImpl(const AttentionOptions& options, const torch::TensorOptions& tensor_options);

  /// x: [B, S, dim]; cos, sin: [S, Dh] (rope_cos_sin) -> [B, S, dim]. Causal; the softmax is
  /// scaled by Dh^-0.5. `hooks` run on x and on the output of wo (x and the output may then be
  /// sequence shards, see tensor_parallel.h).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) override;

  /// Query heads and key/value heads (wq, wk, wv column-parallel; wo row-parallel).
  std::vector<ShardedSize> tensor_parallel_sizes() const override;
  /// With q = heads x Dh, kv = kv_heads x Dh, a = heads (Korthikanti et al. 2022's GPT terms,
  /// which count bytes at 16 bits, hence 2x): q, k after RoPE and v (q + 2kv; their "Q, K
  /// 4sbh + V 2sbh"), the q_norm / k_norm inputs with qk_norm (q + kv), the wo input (q; their
  /// out-projection input 2sbh) and the log-sum-exp per head (a; no s x s scores are kept, which
  /// replaces their 5as^2b), all between the column- and row-parallel projections. Op-level
  /// checkpointing recomputes the q/k norms.
  SavedElements saved_elements(bool op_level) const override;
  /// 2 x kv heads x head_dim.
  int64_t key_value_elements() const override;
  /// 6 x parameters + 12 x heads x Dh x seq_len (scores and values, forward and backward).
  int64_t flops_per_token(int64_t seq_len) const override;
  /// q_norm's and k_norm's (none without qk_norm).
  std::vector<ElementwiseOp*> recomputed_ops() override;

  AttentionOptions options;
  Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // null unless options.qk_norm
  ModuleHooks hooks;
};
TORCH_MODULE(Attention);

}  // namespace titan::models
