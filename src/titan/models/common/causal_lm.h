// The interface every model family implements: a decoder-only language model made of a token
// embedding, a list of transformer blocks, a final norm and an output projection. The trainer,
// parallelisms (FSDP wraps each block), checkpoints and generation only see this interface.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace titan::models {

/// Sizes the metrics and planner need (TorchTitan's get_nparams_and_flops).
struct ModelShape {
  int64_t dim = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t n_kv_heads = 0;      // key/value heads (== n_heads without grouped-query attention)
  int64_t ffn_hidden_dim = 0;  // SwiGLU hidden width
  bool qk_norm = false;        // per-head RMSNorm on q and k (Qwen3)
};

class CausalLM : public torch::nn::Module {
 public:
  /// tokens: [B, S] int64 -> logits [B, S, vocab] in the parameters' dtype.
  virtual torch::Tensor forward(const torch::Tensor& tokens) = 0;
  /// TorchTitan initialisation (truncated normal, depth-scaled output projections),
  /// deterministic in `seed`.
  virtual void init_weights(uint64_t seed) = 0;
  /// The transformer blocks, in order (FSDP and activation checkpointing wrap each one).
  virtual torch::nn::ModuleList blocks() = 0;
  virtual ModelShape shape() const = 0;

  /// Parameters, counting tied tensors once.
  int64_t num_params();
  /// Parameters of the token embedding (excluded from FLOPs as in TorchTitan).
  virtual int64_t num_embedding_params() = 0;
  /// Training FLOPs per token at `seq_len`: 6 * (params - embedding params)
  /// + 12 * layers * heads * head_dim * seq_len (TorchTitan's formula).
  int64_t flops_per_token(int64_t seq_len);
};

}  // namespace titan::models
