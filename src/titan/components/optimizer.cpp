#include "titan/components/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "titan/errors.h"

namespace titan::components {

AdamOptions AdamOptions::from_config(const config::OptimizerSection& c) {
  if (c.name != "AdamW" && c.name != "Adam") {
    throw ConfigError(
        fmt::format("optimizer.name = '{}' is not allowed; allowed values: AdamW, "
                    "Adam",
                    c.name));
  }
  if (c.implementation != "fused" && c.implementation != "for-loop") {
    throw ConfigError(
        fmt::format("optimizer.implementation = '{}' is not allowed; allowed "
                    "values: fused, for-loop",
                    c.implementation));
  }
  AdamOptions o;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.decoupled = c.name == "AdamW";
  o.fused = c.implementation == "fused";
  return o;
}

Adam::Adam(std::vector<torch::Tensor> params, AdamOptions options)
    : params_(std::move(params)), options_(options) {}

std::pair<std::vector<torch::Tensor>&, std::vector<torch::Tensor>&> Adam::state() {
  if (exp_avg_.empty()) {
    for (const auto& p : params_) {
      exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
      exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    }
  }
  return {exp_avg_, exp_avg_sq_};
}

void Adam::step(double lr, double grad_scale) {
  torch::NoGradGuard no_grad;
  state();
  ++step_;
  if (options_.fused) {
    fused_step(lr, grad_scale);
  } else {
    for_loop_step(lr, grad_scale);
  }
}

void Adam::fused_step(double lr, double grad_scale) {
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    exp_avg.push_back(exp_avg_[i]);
    exp_avg_sq.push_back(exp_avg_sq_[i]);
  }
  if (params.empty()) return;
  // The kernels read each parameter's step count (already incremented) and do not change it.
  const std::vector<torch::Tensor> steps(
      params.size(), torch::full({}, double(step_), params.front().options().dtype(torch::kFloat)));
  // The kernels divide each gradient by grad_scale (AMP's unscaling): pass the reciprocal.
  std::optional<torch::Tensor> divisor;
  if (grad_scale != 1.0) {
    divisor = torch::full({}, 1.0 / grad_scale, params.front().options().dtype(torch::kFloat));
  }
  const auto& o = options_;
  if (o.decoupled) {
    at::_fused_adamw_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, steps, lr,
                      o.beta1, o.beta2, o.weight_decay, o.eps, /*amsgrad=*/false,
                      /*maximize=*/false, divisor, std::nullopt);
  } else {
    at::_fused_adam_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, steps, lr, o.beta1,
                     o.beta2, o.weight_decay, o.eps, /*amsgrad=*/false,
                     /*maximize=*/false, divisor, std::nullopt);
  }
}

void Adam::for_loop_step(double lr, double grad_scale) {
  const auto& o = options_;
  double bias1 = 1.0 - std::pow(o.beta1, static_cast<double>(step_));
  double bias2 = 1.0 - std::pow(o.beta2, static_cast<double>(step_));
  double step_size = lr / bias1;
  double bias2_sqrt = std::sqrt(bias2);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    if (grad_scale != 1.0) p.grad().mul_(grad_scale);
    torch::Tensor g = p.grad();
    if (o.decoupled) {
      p.mul_(1.0 - lr * o.weight_decay);
    } else if (o.weight_decay != 0) {
      g = g.add(p, o.weight_decay);
    }
    exp_avg_[i].lerp_(g, 1.0 - o.beta1);                            // m = b1 m + (1-b1) g
    exp_avg_sq_[i].mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);     // v = b2 v + (1-b2) g^2
    auto denom = (exp_avg_sq_[i].sqrt() / bias2_sqrt).add_(o.eps);  // sqrt(v_hat) + eps
    p.addcdiv_(exp_avg_[i], denom, -step_size);                     // p -= lr m_hat / denom
  }
}

void Adam::zero_grad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
  }
}

}  // namespace titan::components
