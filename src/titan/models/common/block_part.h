// The replaceable parts of a transformer block: its attention (grouped-query attention today;
// MLA with DeepSeek-V3) and its feed-forward network (SwiGLU today; a mixture of experts with
// the MoE families). Tensor parallelism's checks, the planner's activation count and the FLOPs
// per token ask each part what it holds instead of assuming Llama's shape.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/models/common/causal_attention.h"
#include "titan/models/common/elementwise_op.h"
#include "titan/models/common/sequence_shard.h"

namespace titan::models {

/// Elements saved per token for backward, by where tensor parallelism leaves them: in the
/// sequence regions (norms and the residual stream, [B, S, d]: split by tp only with sequence
/// parallelism) and between the column- and row-parallel projections (heads, FFN columns:
/// always split by tp).
struct SavedElements {
  int64_t sequence = 0;
  int64_t tensor = 0;

  int64_t total() const { return sequence + tensor; }
  SavedElements operator*(int64_t n) const { return {sequence * n, tensor * n}; }
  SavedElements operator+(const SavedElements& o) const {
    return {sequence + o.sequence, tensor + o.tensor};
  }
};

/// A size tensor parallelism splits ("query heads", 32): the degree must divide it.
struct ShardedSize {
  std::string what;
  int64_t value = 0;
};

/// Its questions are answered for the part as built, whole (tensor parallelism later narrows
/// its weights and head counts to this rank's).
class BlockPart : public torch::nn::Module {
 public:
  /// The sizes this part's tensor-parallel plan splits.
  virtual std::vector<ShardedSize> tensor_parallel_sizes() const = 0;
  /// Elements the part saves per token for its backward when nothing is recomputed
  /// (`op_level` false) or under op-level selective checkpointing (its norms and gates
  /// recomputed, see distributed/activation_checkpoint.h). Its input norm is the block's.
  virtual SavedElements saved_elements(bool op_level) const = 0;
  /// Training FLOPs per token at `seq_len` (TorchTitan's count: 6 x the parameters each token
  /// uses, plus attention's 12 x heads x head_dim x seq_len).
  virtual int64_t flops_per_token(int64_t seq_len) const = 0;
  /// The cheap elementwise ops (norms, gates) op-level selective checkpointing recomputes in
  /// backward instead of keeping their outputs.
  virtual std::vector<ElementwiseOp*> recomputed_ops() = 0;
  /// Parameters a token does not use (a mixture of experts: the experts it is not routed to).
  virtual int64_t unused_params_per_token() const { return 0; }

 protected:
  /// Parameters of this part, counted on any device (meta included).
  int64_t num_params() const {
    int64_t n = 0;
    for (const auto& p : parameters()) n += p.numel();
    return n;
  }
};

/// The attention slot: x [B, S, dim] with RoPE's cos, sin [S, rope_dim] -> [B, S, dim].
class AttentionPart : public BlockPart {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos,
                                const torch::Tensor& sin) = 0;
  /// Elements per token of the keys and values the attention reads, over all heads (tensor
  /// parallelism splits them): what allgather context parallelism keeps (cp - 1) more of.
  virtual int64_t key_value_elements() const = 0;

  /// Null: this rank holds whole sequences. Context parallelism sets it.
  std::shared_ptr<SequenceShard> sequence_shard;
  /// RoPE on q and on k, inputs {x [B, S, heads, Dh], cos, sin}: apply_rope (or MLA's
  /// apply_rope_interleaved) eagerly; compile mode installs the fused kernel (kernels/rope.h).
  ElementwiseOp rotary;
  /// Causal attention over whole sequences (causal_attention.h's contract): LibTorch's kernel
  /// eagerly; compile mode installs the fused one (kernels/attention.h).
  using AttentionKernel = torch::Tensor (*)(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, double scale);
  AttentionKernel kernel = causal_attention;

 protected:
  /// `kernel`, or the sequence shard's attention over the whole sequence when ranks share it.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       double scale) const {
    return sequence_shard ? sequence_shard->attention(q, k, v, scale) : kernel(q, k, v, scale);
  }
};

/// The feed-forward slot: x [B, S, dim] -> [B, S, dim].
class FeedForwardPart : public BlockPart {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  /// The block's name for this part (TorchTitan's: "feed_forward", "moe" for experts).
  virtual const char* slot_name() const { return "feed_forward"; }
};

}  // namespace titan::models
