// A token embedding table whose weight is allocated uninitialised on any device (torch::kMeta
// included); see linear.h for why torch::nn::Embedding does not fit. Under tensor parallelism
// the table is vocab-parallel (Megatron-LM's VocabParallelEmbedding): this rank holds rows
// [vocab_start, vocab_start + weight.size(0)), looks up only the ids in that range (zeros for
// the others), and `hooks.output` sums the partial rows over the ranks.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "titan/models/common/module_hooks.h"
#include "titan/models/common/weight_module.h"

namespace titan::models {

class EmbeddingImpl : public WeightModule {
 public:
  /// weight: [num_embeddings, dim], dtype/device from `options`, uninitialised.
  EmbeddingImpl(int64_t num_embeddings, int64_t dim, const torch::TensorOptions& options) {
    weight = register_parameter("weight", torch::empty({num_embeddings, dim}, options));
  }

  /// ids: [...] int64 in [0, vocab) -> [..., dim], through hooks.output.
  torch::Tensor forward(const torch::Tensor& ids) {
    if (!vocab_parallel) return hooks.on_output(torch::embedding(weight, ids));
    auto local = ids - vocab_start;                                    // local: [...]
    auto outside = local.lt(0).logical_or(local.ge(weight.size(0)));  // outside: [...]
    auto rows = torch::embedding(weight, local.masked_fill(outside, 0));  // rows: [..., dim]
    return hooks.on_output(rows.masked_fill(outside.unsqueeze(-1), 0));
  }

  bool vocab_parallel = false;
  int64_t vocab_start = 0;  // first id of this rank's rows when vocab_parallel
  ModuleHooks hooks;
};
TORCH_MODULE(Embedding);

}  // namespace titan::models
