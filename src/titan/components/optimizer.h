// AdamW / Adam over a list of parameters, with the state kept beside each parameter so that a
// sharded parameter (FSDP) has sharded state. Follows PyTorch's torch.optim.AdamW
// (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019) and torch.optim.Adam
// (Kingma & Ba, 2015), TorchTitan's defaults (lr 8e-4, betas 0.9/0.95, eps 1e-8, wd 0.1) and
// its optimizer.implementation: "fused" (default) runs PyTorch's fused kernels
// (at::_fused_adamw_ / _fused_adam_: one vectorised pass over each parameter, its gradient
// and moments, the clipping factor folded in), "for-loop" one tensor op at a time.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::components {

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decoupled = true;  // AdamW; false = Adam with L2 added to the gradient
  bool fused = true;      // optimizer.implementation "fused"; false = "for-loop"

  /// From `optimizer.*`; throws ConfigError for an unknown optimizer.name or implementation.
  static AdamOptions from_config(const config::OptimizerSection& c);
};

class Adam {
 public:
  /// `params`: float32 tensors (requires_grad) whose .grad() is read by step(). The moments
  /// are allocated on first use (a step, or a checkpoint asking for them), as PyTorch's
  /// optimizers create their state lazily: a run that only writes a seed checkpoint never
  /// holds them.
  Adam(std::vector<torch::Tensor> params, AdamOptions options);

  /// One update at learning rate `lr` using each parameter's .grad() times `grad_scale`
  /// (gradient clipping's factor; the gradients are left scaled), parameters without a
  /// gradient skipped. Runs under NoGradGuard.
  void step(double lr, double grad_scale = 1.0);
  /// Sets every gradient to None.
  void zero_grad();

  int64_t steps_taken() const { return step_; }
  /// Restores the step count (bias correction) from a checkpoint.
  void set_steps_taken(int64_t steps) { step_ = steps; }
  /// First and second moments, one per parameter (for checkpoints).
  std::vector<torch::Tensor>& exp_avg() { return state().first; }
  std::vector<torch::Tensor>& exp_avg_sq() { return state().second; }

 private:
  /// The moments, zero-filled on first use.
  std::pair<std::vector<torch::Tensor>&, std::vector<torch::Tensor>&> state();
  void fused_step(double lr, double grad_scale);
  void for_loop_step(double lr, double grad_scale);

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> exp_avg_;
  std::vector<torch::Tensor> exp_avg_sq_;
  AdamOptions options_;
  int64_t step_ = 0;
};

}  // namespace titan::components
