#include "titan/distributed/pipeline/stage.h"

#include <fmt/format.h>

#include <stdexcept>

namespace titan::distributed::pipeline {

PipelineStage::PipelineStage(int index, int num_stages, ModelPart& part)
    : index_(index), num_stages_(num_stages), part_(part) {}

PipelineStage::InFlight& PipelineStage::in_flight(int mb, const char* action) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) {
    throw std::logic_error(fmt::format("pipeline stage {}: {} of microbatch {} before its "
                                       "forward",
                                       index_, action, mb));
  }
  return it->second;
}

torch::Tensor PipelineStage::forward(int mb, const torch::Tensor& input,
                                     const torch::Tensor& labels, double loss_divisor) {
  InFlight f;
  f.input = is_first() ? input : input.detach().requires_grad_(true);
  f.output = is_last() ? part_.forward_loss_sum(f.input, labels) / loss_divisor
                        : part_.model().forward(f.input);  // [mb, S', dim]
  in_flight_[mb] = f;
  return f.output;
}

torch::Tensor PipelineStage::evaluate(const torch::Tensor& input, const torch::Tensor& labels) {
  return is_last() ? part_.forward_loss_sum(input, labels) : part_.model().forward(input);
}

torch::Tensor PipelineStage::backward(int mb, const torch::Tensor& output_grad, bool weights_too) {
  auto& f = in_flight(mb, weights_too ? "backward" : "input backward");
  std::vector<torch::Tensor> grads;
  if (!is_last()) grads.push_back(output_grad);
  if (weights_too) {
    torch::autograd::backward({f.output}, grads);
    auto input_grad = is_first() ? torch::Tensor() : f.input.grad();
    in_flight_.erase(mb);
    return input_grad;
  }
  f.output_grad = output_grad;
  if (is_first()) return torch::Tensor();
  return torch::autograd::grad({f.output}, {f.input}, grads, /*retain_graph=*/true)[0];
}

void PipelineStage::backward_weight(int mb) {
  auto& f = in_flight(mb, "weight backward");
  std::vector<torch::Tensor> grads;
  if (!is_last()) grads.push_back(f.output_grad);
  torch::autograd::backward({f.output}, grads, /*retain_graph=*/false, /*create_graph=*/false,
                            part_.parameters());
  in_flight_.erase(mb);
}

}  // namespace titan::distributed::pipeline
