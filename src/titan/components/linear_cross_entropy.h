// Compile mode's loss: the output projection fused with the cross-entropy (as Liger-Kernel's
// fused linear cross-entropy), so that the [tokens, vocab] logits, their fp32 copy and their
// gradient never exist whole. The tokens go through in chunks of at most kLogitsPerChunk
// logits; forward computes each chunk's logits, its log-sum-exp and, when gradients are
// wanted, the chunk's gradients of the hidden states and the weight right away (the loss is
// the graph's last node, so its upstream gradient is a scalar that backward only multiplies
// in). Under tensor parallelism the vocabulary is already cut into the ranks' slices: the
// log-sum-exp then needs every slice (three all-reduces of [tokens] vectors, as
// loss_parallel.h), so the logits are computed a second time for the gradients.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/distributed/process_group.h"

namespace titan::components {

/// Logits one chunk holds (16 MiB in fp32): chunk_tokens = max(1, this / local vocabulary).
constexpr int64_t kLogitsPerChunk = int64_t(1) << 22;

struct LinearCrossEntropyOptions {
  /// Null: `weight` is the whole vocabulary. Else rank r of the group holds rows
  /// [r * Vl, (r + 1) * Vl) of the vocabulary (vocab-parallel output projection).
  distributed::ProcessGroup* vocab_group = nullptr;
  /// Tokens per chunk; 0: as kLogitsPerChunk allows.
  int64_t chunk_tokens = 0;
};

/// hidden: [B, S, D] in the weight's dtype, weight: [Vl, D], labels: [B, S] int64 in [0, V)
/// -> scalar fp32 (fp64 for fp64 inputs): the sum over the B * S tokens of
/// -log softmax(hidden @ weight^T)[label], the same on every rank of the vocab group. Each
/// chunk's logits are computed in the weight's dtype and their softmax in fp32, as
/// cross_entropy_sum(linear(hidden, weight)) computes them; gradients of hidden (partial over
/// the vocab group, like a column-parallel projection's) and weight (this rank's rows).
/// Collective over `options.vocab_group` when set.
torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& labels,
                                       const LinearCrossEntropyOptions& options = {});

}  // namespace titan::components
