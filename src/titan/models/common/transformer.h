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
  /// device; torch::kMeta gives a shape-only model for parameter and FLOP counts.
  /// Throws ConfigError naming the field for non-positive sizes, an odd head_dim or heads
  /// that do not group evenly.
  explicit Transformer(const TransformerArgs& args,
                       const torch::TensorOptions& options = torch::TensorOptions());

  /// tokens: [B, S] int64 -> logits [B, S, vocab] in the parameters' dtype (this rank's vocab
  /// columns under loss parallelism). Positions 0..S-1.
  torch::Tensor forward_impl(const torch::Tensor& tokens) override;
  /// TorchTitan's init_weights: tok_embeddings ~ N(0, 1); each block as
  /// TransformerBlock::init_weights; norm to ones; output ~ trunc_normal(0, dim^-0.5) cut at
  /// +-3 std. When tied, the shared matrix gets the output rule (TorchTitan initialises the
  /// output last, overwriting the embedding's draw). Deterministic in `seed`.
  void init_weights(uint64_t seed) override;
  torch::nn::ModuleList blocks() override { return layers; }
  ModelShape shape() const override;
  int64_t num_embedding_params() override { return tok_embeddings->weight.numel(); }

  const TransformerArgs& args() const { return args_; }
  /// RoPE frequencies: [head_dim/2] float64 on the CPU (rope_inv_freq of args().rope()).
  const torch::Tensor& inv_freq() const { return inv_freq_; }

  Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};  // TransformerBlock each
  RMSNorm norm{nullptr};
  Linear output{nullptr};  // null when args().tie_embeddings
  /// Run on the final norm's output and on the logits (tensor parallelism: gather the
  /// sequence, keep vocab-parallel logits or gather them).
  ModuleHooks classifier_hooks;

 private:
  TransformerArgs args_;
  torch::Tensor inv_freq_;
};

}  // namespace titan::models
