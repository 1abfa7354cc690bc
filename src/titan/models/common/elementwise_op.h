// A block's cheap elementwise computations (RMSNorm's scaling, SwiGLU's gated product) as one
// op whose intermediates a parallelism may choose not to keep for backward: op-level selective
// activation checkpointing (distributed/activation_checkpoint.h) installs a runner that keeps
// only the op's inputs (block inputs and matmul outputs, which autograd keeps anyway) and
// recomputes the rest in backward; compile mode installs a fused kernel instead.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace titan::models {

struct ElementwiseOp {
  using Fn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

  /// Computes fn(inputs) its own way; empty = directly.
  std::function<torch::Tensor(const std::vector<torch::Tensor>& inputs, const Fn& fn)> runner;
  /// Compile mode: a fused kernel computing what fn does as one autograd node (models/common/
  /// kernels/), which keeps no more than the op's inputs, so it replaces fn and runner both.
  Fn fused;

  torch::Tensor operator()(const std::vector<torch::Tensor>& inputs, const Fn& fn) const {
    if (fused) return fused(inputs);
    return runner ? runner(inputs, fn) : fn(inputs);
  }
};

}  // namespace titan::models
