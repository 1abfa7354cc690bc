// Functions a parallelism runs on a module's input and output (TorchTitan's parallelize_module
// input/output layouts): tensor parallelism, for instance, gathers a sequence-sharded input
// before the attention projections and reduce-scatters their partial output. Empty = identity.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace titan::models {

struct ModuleHooks {
  std::function<torch::Tensor(const torch::Tensor&)> input;
  std::function<torch::Tensor(const torch::Tensor&)> output;

  torch::Tensor on_input(const torch::Tensor& x) const { return input ? input(x) : x; }
  torch::Tensor on_output(const torch::Tensor& y) const { return output ? output(y) : y; }
};

}  // namespace titan::models
