// Cross-entropy over vocab-parallel logits (Megatron-LM's vocab_parallel_cross_entropy;
// TorchTitan's loss_parallel): the logits stay sharded on the vocabulary, and three all-reduces
// of [tokens] vectors (max, sum of exponentials, the label's logit) replace gathering [tokens,
// vocab] logits.
#pragma once

#include <torch/torch.h>

#include "titan/distributed/process_group.h"

namespace titan::distributed {

/// local_logits: [B, S, V / size] (rank r of `group` holds vocab columns [r * V / size,
/// (r + 1) * V / size)), any float dtype, computed in fp32; labels: [B, S] int64 in [0, V)
/// -> scalar fp32, the same on every rank: the sum over the B * S tokens of
/// -log softmax(logits)[label]. Backward gives each rank the gradient of its own columns,
/// softmax - one_hot(label) (collective: every rank of `group` calls it).
torch::Tensor vocab_parallel_cross_entropy_sum(const torch::Tensor& local_logits,
                                               const torch::Tensor& labels, ProcessGroup& group);

}  // namespace titan::distributed
