// The base of every module that owns a parameter (Linear, Embedding, RMSNorm): one public
// `weight` handle that forward reads. Parallelisms (FSDP, activation checkpointing) swap this
// handle for the tensor to compute with (e.g. a gathered full parameter) around a forward,
// while the registered parameter stays the one the optimizer and checkpoints see.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace titan::models {

class WeightModule : public torch::nn::Module {
 public:
  torch::Tensor weight;
};

/// Every WeightModule in `root`'s tree, `root` included, in registration order, skipping the
/// subtrees of `exclude` (e.g. the blocks, when collecting a model's root parameters).
std::vector<WeightModule*> weight_modules(torch::nn::Module& root,
                                          const std::vector<torch::nn::Module*>& exclude = {});

}  // namespace titan::models
