// The base of every module that owns a parameter (Linear, Embedding, RMSNorm): one public
// `weight` handle that forward reads. Parallelisms (FSDP, activation checkpointing) swap this
// handle for the tensor to compute with (e.g. a gathered full parameter) around a forward,
// while the registered parameter stays the one the optimizer and checkpoints see.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "titan/models/common/init.h"

namespace titan::models {

class WeightModule : public torch::nn::Module {
 public:
  torch::Tensor weight;
  /// How `weight` is initialised (set by the module or by the block that owns it).
  InitRule init;
};

/// Every WeightModule in `root`'s tree, `root` included, in registration order, skipping the
/// subtrees of `exclude` (e.g. the blocks, when collecting a model's root parameters).
std::vector<WeightModule*> weight_modules(torch::nn::Module& root,
                                          const std::vector<torch::nn::Module*>& exclude = {});

/// Every WeightModule under `root` by the fully qualified name of its weight
/// ("layers.0.attention.wq.weight").
std::map<std::string, WeightModule*> weight_modules_by_name(torch::nn::Module& root);

}  // namespace titan::models
