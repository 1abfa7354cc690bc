// Compile mode's loss: the output projection fused with the cross-entropy (as Liger-Kernel's
// fused linear cross-entropy), so that the [tokens, vocab] logits, their fp32 copy and their
// gradient never exist whole. The logits are computed in blocks of tokens x vocabulary rows
// (at most kLogitsPerBlock of them): a first sweep gathers each token's log-sum-exp online
// across the vocabulary blocks, a second computes the blocks again for the gradients of the
// hidden states and the weight, right away in forward (the loss is the graph's last node, so
// its upstream gradient is a scalar that backward only multiplies in). Whole-vocabulary blocks
// (a small vocabulary) take one sweep. Blocks rather than whole rows keep the GEMMs' shapes
// large and each weight gradient row written once per token block: with Qwen3's 151,936
// vocabulary a whole-row chunk would hold 27 tokens. Under tensor parallelism the vocabulary
// is already cut into the ranks' slices: the log-sum-exp then needs every slice (three
// all-reduces of [tokens] vectors between the sweeps, as loss_parallel.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/distributed/process_group.h"

namespace titan::components {

/// Logits one block holds (16 MiB in fp32).
constexpr int64_t kLogitsPerBlock = int64_t(1) << 22;
/// Tokens one block holds at most, unless LinearCrossEntropyOptions::block_tokens says.
constexpr int64_t kTokensPerBlock = 1024;

struct LinearCrossEntropyOptions {
  /// Null: `weight` is the whole vocabulary. Else rank r of the group holds rows
  /// [r * Vl, (r + 1) * Vl) of the vocabulary (vocab-parallel output projection).
  distributed::ProcessGroup* vocab_group = nullptr;
  /// Tokens per block; 0: kTokensPerBlock.
  int64_t block_tokens = 0;
  /// Vocabulary rows per block; 0: as kLogitsPerBlock allows.
  int64_t block_vocab = 0;
};

/// One block's shape for `tokens` tokens over a local vocabulary of `vocab` rows.
struct LossBlock {
  int64_t tokens = 1, vocab = 1;
};
LossBlock loss_block(int64_t tokens, int64_t vocab, const LinearCrossEntropyOptions& options = {});

/// hidden: [B, S, D] in the weight's dtype, weight: [Vl, D], labels: [B, S] int64 in [0, V)
/// -> scalar fp32 (fp64 for fp64 inputs): the sum over the B * S tokens of
/// -log softmax(hidden @ weight^T)[label], the same on every rank of the vocab group. Each
/// block's logits are computed in the weight's dtype and their softmax in fp32, as
/// cross_entropy_sum(linear(hidden, weight)) computes them; gradients of hidden (partial over
/// the vocab group, like a column-parallel projection's) and weight (this rank's rows).
/// Collective over `options.vocab_group` when set.
torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& labels,
                                       const LinearCrossEntropyOptions& options = {});

}  // namespace titan::components
