// The interface every model family implements: a decoder-only language model made of a token
// embedding, a list of transformer blocks, a final norm and an output projection. The trainer,
// parallelisms (FSDP wraps each block), checkpoints and generation only see this interface.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>
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
  using TensorFn = std::function<torch::Tensor(const torch::Tensor&)>;
  /// Computes inner(x) its own way (e.g. gathering parameters first, or recomputing in
  /// backward); `layer` is the block index, or -1 for the whole model.
  using Wrapper =
      std::function<torch::Tensor(int64_t layer, const torch::Tensor& x, const TensorFn& inner)>;

  /// tokens: [B, S] int64 -> logits [B, S, vocab] in the parameters' dtype: forward_impl
  /// through the model wrappers.
  torch::Tensor forward(const torch::Tensor& tokens);
  /// Adds a wrapper around every block's forward. Later wrappers run outside earlier ones, so
  /// TorchTitan's order (activation checkpointing, then FSDP) is the order of the calls.
  void add_block_wrapper(Wrapper wrapper) { block_wrappers_.push_back(std::move(wrapper)); }
  /// Adds a wrapper around the whole forward (layer -1), e.g. FSDP's root unit.
  void add_model_wrapper(Wrapper wrapper) { model_wrappers_.push_back(std::move(wrapper)); }
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

 protected:
  /// The family's forward: tokens [B, S] -> logits [B, S, vocab]; runs each block through
  /// run_block().
  virtual torch::Tensor forward_impl(const torch::Tensor& tokens) = 0;
  /// Block `layer`'s forward `block` on x, through the block wrappers.
  torch::Tensor run_block(int64_t layer, const torch::Tensor& x, const TensorFn& block);

 private:
  static torch::Tensor run_wrapped(const std::vector<Wrapper>& wrappers, int64_t layer,
                                   const torch::Tensor& x, const TensorFn& inner);

  std::vector<Wrapper> block_wrappers_;
  std::vector<Wrapper> model_wrappers_;
};

}  // namespace titan::models
