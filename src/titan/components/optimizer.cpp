#include "titan/components/optimizer.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"

namespace titan::components {

AdamOptions AdamOptions::from_config(const config::OptimizerSection& c) {
  if (c.name != "AdamW" && c.name != "Adam") {
    throw ConfigError(fmt::format("optimizer.name = '{}' is not allowed; allowed values: AdamW, "
                                  "Adam",
                                  c.name));
  }
  AdamOptions o;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.decoupled = c.name == "AdamW";
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

void Adam::step(double lr) {
  torch::NoGradGuard no_grad;
  state();
  ++step_;
  const auto& o = options_;
  double bias1 = 1.0 - std::pow(o.beta1, static_cast<double>(step_));
  double bias2 = 1.0 - std::pow(o.beta2, static_cast<double>(step_));
  double step_size = lr / bias1;
  double bias2_sqrt = std::sqrt(bias2);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    torch::Tensor g = p.grad();
    if (o.decoupled) {
      p.mul_(1.0 - lr * o.weight_decay);
    } else if (o.weight_decay != 0) {
      g = g.add(p, o.weight_decay);
    }
    exp_avg_[i].lerp_(g, 1.0 - o.beta1);                           // m = b1 m + (1-b1) g
    exp_avg_sq_[i].mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);    // v = b2 v + (1-b2) g^2
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
