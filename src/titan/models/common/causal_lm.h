// The interface every model family implements: a decoder-only language model made of a token
// embedding, a list of transformer blocks, a final norm and an output projection, or one part of
// it (a pipeline stage: some blocks, with or without the embedding and the norm/output). Blocks
// are keyed by their global layer id ("layers.7...") in every part, so parameter names, FSDP
// units, activation checkpointing and checkpoints are the same whatever the split. The trainer,
// parallelisms (FSDP wraps each block), checkpoints and generation only see this interface.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "titan/models/common/sequence_shard.h"

namespace titan::models {

/// Sizes of the whole model that do not depend on what its blocks hold (those the blocks
/// answer: TransformerBlockImpl::parts).
struct ModelShape {
  int64_t dim = 0;
  int64_t n_layers = 0;
  int64_t vocab_size = 0;
};

/// Which pieces of the model one part holds: blocks [first_layer, end_layer) (end -1: to the
/// last), the token embedding when `embedding`, the final norm and output when `output`.
/// A part without the embedding takes hidden states [B, S, dim]; one without the output
/// returns them.
struct PartRange {
  int64_t first_layer = 0;
  int64_t end_layer = -1;
  bool embedding = true;
  bool output = true;
};

class TransformerBlockImpl;

/// One transformer block of a model part.
struct BlockRef {
  int64_t layer_id;  // global, 0-based
  TransformerBlockImpl* module;
};

class CausalLM : public torch::nn::Module {
 public:
  using TensorFn = std::function<torch::Tensor(const torch::Tensor&)>;
  /// Computes inner(x) its own way (e.g. gathering parameters first, or recomputing in
  /// backward); `layer` is the block's global layer id, or -1 for the whole part.
  using Wrapper =
      std::function<torch::Tensor(int64_t layer, const torch::Tensor& x, const TensorFn& inner)>;

  /// What compile mode's fused loss computes in place of the logits: a scalar from the final
  /// norm's output [B, S, dim] (after the classifier's input hooks) and the output projection's
  /// weight [vocab (this rank's rows under tensor parallelism), dim].
  using ClassifierLoss =
      std::function<torch::Tensor(const torch::Tensor& hidden, const torch::Tensor& weight)>;

  /// tokens: [B, S] int64 (hidden states [B, S, dim] for a part without the embedding) ->
  /// logits [B, S, vocab] in the parameters' dtype (hidden states for a part without the
  /// output), or with `loss`, in a part with the output, what `loss` returns: forward_impl
  /// through the model wrappers.
  torch::Tensor forward(const torch::Tensor& input, const ClassifierLoss& loss = {});
  /// Adds a wrapper around every block's forward. Later wrappers run outside earlier ones, so
  /// TorchTitan's order (activation checkpointing, then FSDP) is the order of the calls.
  void add_block_wrapper(Wrapper wrapper) { block_wrappers_.push_back(std::move(wrapper)); }
  /// Adds a wrapper around the whole forward (layer -1), e.g. FSDP's root unit.
  void add_model_wrapper(Wrapper wrapper) { model_wrappers_.push_back(std::move(wrapper)); }
  /// Initialises every parameter of a whole (unsharded) model by its module's init rule,
  /// deterministic in `seed` and equal to what any parallel layout initialises (init.h).
  void init_weights(uint64_t seed);
  /// This part's transformer blocks, in order (FSDP and activation checkpointing wrap each).
  virtual std::vector<BlockRef> blocks() = 0;
  virtual ModelShape shape() const = 0;
  /// Whether this part ends with the final norm and output (it computes the logits).
  virtual bool holds_output() const = 0;

  /// Parameters, counting tied tensors once.
  int64_t num_params();
  /// The parameters one token uses: num_params() less the experts it is not routed to
  /// (TorchTitan's active parameters of an MoE model).
  int64_t num_active_params();
  /// Parameters of the token embedding (excluded from FLOPs as in TorchTitan).
  virtual int64_t num_embedding_params() = 0;
  /// Training FLOPs per token at `seq_len` of the whole model (the family's count, as
  /// TorchTitan's get_nparams_and_flops).
  virtual int64_t flops_per_token(int64_t seq_len) = 0;

  /// Null: this rank holds whole sequences, its tokens at positions 0..S-1. Context parallelism
  /// sets it (RoPE then uses the positions of this rank's chunks).
  std::shared_ptr<SequenceShard> sequence_shard;

 protected:
  /// The family's forward (see forward()); runs each block through run_block().
  virtual torch::Tensor forward_impl(const torch::Tensor& input, const ClassifierLoss& loss) = 0;
  /// Block `layer`'s forward `block` on x, through the block wrappers (a profiler range
  /// "layers.<layer>" around `block` itself).
  torch::Tensor run_block(int64_t layer, const torch::Tensor& x, const TensorFn& block);

 private:
  static torch::Tensor run_wrapped(const std::vector<Wrapper>& wrappers, int64_t layer,
                                   const torch::Tensor& x, const TensorFn& inner);

  std::vector<Wrapper> block_wrappers_;
  std::vector<Wrapper> model_wrappers_;
};

}  // namespace titan::models
