#include "titan/models/common/loss.h"

namespace titan::models {

torch::Tensor cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  int64_t vocab = logits.size(-1);
  auto flat = logits.reshape({-1, vocab}).to(torch::kFloat);  // [B*S, V]
  return torch::nn::functional::cross_entropy(
      flat, labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

}  // namespace titan::models
