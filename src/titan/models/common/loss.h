// The training loss: next-token cross-entropy, summed over tokens so that the caller can
// normalise by the global token count of the step (exact under accumulation and data
// parallelism).
#pragma once

#include <torch/torch.h>

namespace titan::models {

/// logits: [B, S, V] (any float dtype, computed in fp32), labels: [B, S] int64
/// -> scalar fp32: sum over the B*S tokens of -log softmax(logits)[label].
torch::Tensor cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& labels);

}  // namespace titan::models
