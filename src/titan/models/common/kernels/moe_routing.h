// Compile mode's mixture-of-experts routing (models/common/moe.h computes the same eagerly):
// the router's choice after its logits in one pass per token (scores, bias, group limit, top-k
// with ties to the lower index, gates; backward only through the k chosen scores), the copies
// ordered by expert with a counting sort, and the two moves between token order and expert
// order as gathers that never build the [T, K, dim] copies the eager composition sums over.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/moe.h"

namespace titan::models::kernels {

/// logits: [T, E] (float32, or float64), expert_bias: [E] (added in logits' dtype) or undefined
/// -> experts [T, K] and gates [T, K] in logits' dtype, as TokenChoiceRouterImpl decides them
/// from these logits
/// (scores by ATen's softmax or sigmoid, so ties and choices equal the eager router's).
/// Gradient of logits. CPU tensors only, logits [T, E] and a bias of E entries (c10::Error
/// otherwise); arguments that cannot route throw as validate(args).
Routing route(const torch::Tensor& logits, const torch::Tensor& expert_bias, const MoEArgs& args);

/// experts: [T, K] int64 in [0, num_experts) -> their CopyOrder (copies sorted by expert, ties
/// in copy order), in O(T K). CPU only; throws c10::Error naming an expert out of range.
CopyOrder sort_copies(const torch::Tensor& experts, int64_t num_experts);

/// tokens: [T, dim] (float32, float64 or bfloat16), gates: [T, K] (float32/64) or undefined ->
/// routed: [N, dim], row r = tokens[copy[r] / K] (times its copy's gate, in the gates' dtype).
/// Gradients of tokens (each token's K rows summed once, no scatter) and gates.
torch::Tensor permute_copies(const torch::Tensor& tokens, const CopyOrder& order,
                             const torch::Tensor& gates);

/// expert_out: [N, dim] in the sorted order, gates: [T, K] or undefined -> out: [T, dim],
/// out[t] = sum_k gates[t, k] * expert_out[position[t, k]] summed in float32 (float64) and
/// rounded once. Gradients of expert_out (each row written once) and gates.
torch::Tensor combine_copies(const torch::Tensor& expert_out, const CopyOrder& order,
                             const torch::Tensor& gates);

}  // namespace titan::models::kernels
