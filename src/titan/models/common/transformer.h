// The decoder-only Transformer shared by the llama3 and qwen3 families (TorchTitan's
// llama3 Transformer; Qwen3 adds q/k norms through TransformerArgs::qk_norm):
//   tok_embeddings -> layers.{i} (TransformerBlock) -> norm -> output.
// With args.tie_embeddings there is no `output` submodule: the classifier multiplies by
// tok_embeddings.weight, which is then the only copy of that matrix.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/causal_lm.h"
#include "titan/models/common/embedding.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/module_hooks.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/transformer_args.h"

namespace titan::models {

class Transformer : public CausalLM {
 public:
  /// Parameters are allocated uninitialised (norms excepted: ones) with `options`' dtype and
  /// device; torch::kMeta gives a shape-only model for parameter and FLOP counts, or one that
  /// parallelisms shard before each rank allocates its pieces. Init rules are TorchTitan's:
  /// tok_embeddings ~ N(0, 1); each block as transformer_block's; norm to ones; output ~
  /// trunc_normal(0, dim^-0.5) cut at +-3 std. When tied, the shared matrix gets the output
  /// rule (TorchTitan initialises the output last, overwriting the embedding's draw).
  /// `part` selects the pieces this model holds (the whole model by default).
  /// Throws ConfigError naming the field for non-positive sizes, an odd head_dim, heads that
  /// do not group evenly, a layer range outside [0, n_layers), or tied embeddings split from
  /// the output.
  explicit Transformer(const TransformerArgs& args,
                       const torch::TensorOptions& options = torch::TensorOptions(),
                       const PartRange& part = PartRange());

  /// tokens: [B, S] int64 (or hidden states [B, S / residual_sequence_shards, dim] without the
  /// embedding) -> logits [B, S, vocab] in the parameters' dtype (this rank's vocab columns
  /// under loss parallelism), or hidden states as the input's without the output. Positions
  /// 0..S-1. With `loss`, returns loss(final hidden states, classifier weight) instead of the
  /// logits.
  torch::Tensor forward_impl(const torch::Tensor& input, const ClassifierLoss& loss) override;
  std::vector<BlockRef> blocks() override;
  ModelShape shape() const override;
  bool holds_output() const override { return static_cast<bool>(norm); }
  int64_t num_embedding_params() override {
    return tok_embeddings ? tok_embeddings->weight.numel() : 0;
  }
  /// TorchTitan's count: every block's (its parts', block_part.h: 6 x parameters, + 12 x heads
  /// x head_dim x seq_len for attention) + 6 x the final norm and the output (with tied
  /// embeddings the shared matrix counts as the embedding). The whole model's, in any part:
  /// its own blocks as they are, the others as transformer_block builds them. Asked before
  /// parallelisms (they narrow the parts).
  int64_t flops_per_token(int64_t seq_len) override;

  const TransformerArgs& args() const { return args_; }
  /// RoPE frequencies: [head_dim/2] float64 on the CPU (rope_inv_freq of args().rope()).
  const torch::Tensor& inv_freq() const { return inv_freq_; }

  Embedding tok_embeddings{nullptr};  // null in a part without the embedding
  torch::nn::ModuleDict layers{nullptr};  // transformer_block each, keyed by global layer id
  RMSNorm norm{nullptr};     // null in a part without the output
  Linear output{nullptr};    // null when args().tie_embeddings or in a part without the output
  /// Run on the final norm's output and on the logits (tensor parallelism: gather the
  /// sequence, keep vocab-parallel logits or gather them).
  ModuleHooks classifier_hooks;
  /// How many pieces of each sequence the hidden states between blocks are cut into on this
  /// rank (sequence parallelism: tp); a part without the embedding takes such a piece and
  /// finds the sequence length, which RoPE needs, from it.
  int64_t residual_sequence_shards = 1;

 private:
  TransformerArgs args_;
  torch::Tensor inv_freq_;
};

}  // namespace titan::models
