// Compile mode's loss: the output projection fused with the cross-entropy (as Liger-Kernel's
// fused linear cross-entropy), so that the [tokens, vocab] logits, their fp32 copy and their
// gradient never exist whole. The logits are computed in blocks of tokens x vocabulary rows.
// On one rank a block holds whole vocabulary rows for at least kOneSweepTokens tokens (up to
// kOneSweepLogits logits): its softmax is then complete at once, and the block's gradients of
// the hidden states and the weight follow right away, three GEMMs as in eager (the loss is the
// graph's last node, so its upstream gradient is a scalar that backward only multiplies in).
// Otherwise (a vocabulary too large for that, or cut into tensor-parallel slices) blocks of at
// most kLogitsPerBlock logits take two sweeps: the first gathers each token's log-sum-exp
// online across the vocabulary blocks, the second computes the blocks again for the gradients
// (four GEMMs). Under tensor parallelism the log-sum-exp needs every slice (three all-reduces
// of [tokens] vectors between the sweeps, as loss_parallel.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/distributed/process_group.h"

namespace titan::distributed {

/// Logits one block of the two-sweep path holds (16 MiB in fp32).
constexpr int64_t kLogitsPerBlock = int64_t(1) << 22;
/// Tokens one block holds at most, unless LinearCrossEntropyOptions::block_tokens says.
constexpr int64_t kTokensPerBlock = 1024;
/// Tokens a one-sweep block holds at least: with fewer, the GEMMs over whole vocabulary rows
/// slow down more than the second sweep costs (bench/NOTES.md, the fused loss in one sweep).
constexpr int64_t kOneSweepTokens = 512;
/// Logits a one-sweep block holds at most (512 MiB in fp32; 297 MiB at Qwen3's vocabulary):
/// vocabularies above 262,144 rows take two sweeps.
constexpr int64_t kOneSweepLogits = int64_t(1) << 27;

struct LinearCrossEntropyOptions {
  /// Null: `weight` is the whole vocabulary. Else rank r of the group holds rows
  /// [r * Vl, (r + 1) * Vl) of the vocabulary (vocab-parallel output projection).
  ProcessGroup* vocab_group = nullptr;
  /// Tokens per block; 0: kTokensPerBlock.
  int64_t block_tokens = 0;
  /// Vocabulary rows per block; 0: as kLogitsPerBlock allows.
  int64_t block_vocab = 0;
};

/// One block's shape for `tokens` tokens over a local vocabulary of `vocab` rows (a slice of
/// it when `sliced`, under tensor parallelism); one sweep when its rows are the whole
/// vocabulary.
struct LossBlock {
  int64_t tokens = 1, vocab = 1;
  bool one_sweep = false;
};
LossBlock loss_block(int64_t tokens, int64_t vocab, bool sliced,
                     const LinearCrossEntropyOptions& options = {});

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

}  // namespace titan::distributed
