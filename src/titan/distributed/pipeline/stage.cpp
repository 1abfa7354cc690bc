#include "titan/distributed/pipeline/stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "titan/platform/logging.h"

namespace titan::distributed::pipeline {

PipelineStage::PipelineStage(int index, int num_stages, ModelPart& part, bool split_backward)
    : index_(index), num_stages_(num_stages), part_(part), split_backward_(split_backward) {}

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
  std::optional<platform::WeightGradRecorder::Recording> recording;
  if (split_backward_) {
    f.deferred = std::make_unique<platform::WeightGradRecorder>();
    recording.emplace(*f.deferred);
  }
  f.output = is_last() ? part_.forward_loss_sum(f.input, labels) / loss_divisor
                        : part_.model().forward(f.input);  // [mb, S', dim]
  auto output = f.output;
  in_flight_[mb] = std::move(f);
  return output;
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
  if (!f.deferred) throw std::logic_error("pipeline stage: an input backward in a schedule "
                                          "without weight backwards");
  if (!is_first()) {
    return torch::autograd::grad({f.output}, {f.input}, grads, /*retain_graph=*/true)[0];
  }
  f.input_pass_params = f.deferred->undeferrable(f.output, part_.parameters());
  if (!f.input_pass_params.empty()) {
    torch::autograd::backward({f.output}, grads, /*retain_graph=*/true, /*create_graph=*/false,
                              f.input_pass_params);
  }
  return torch::Tensor();
}

void PipelineStage::backward_weight(int mb) {
  auto& f = in_flight(mb, "weight backward");
  std::vector<torch::Tensor> params;  // those I has not given their gradients
  for (const auto& p : part_.parameters()) {
    const bool done = std::any_of(f.input_pass_params.begin(), f.input_pass_params.end(),
                                  [&](const torch::Tensor& q) { return q.is_same(p); });
    if (!done) params.push_back(p);
  }
  const auto counts = f.deferred->backward(f.output, f.output_grad, params);
  if (!weight_pass_logged_) {
    log::info("Pipeline stage {}: the input pass computes {} parameters' gradients, the weight "
              "pass {} from the products the input pass deferred and {} by walking the graph "
              "again",
              index_, f.input_pass_params.size(), counts.deferred, counts.walked);
    weight_pass_logged_ = true;
  }
  in_flight_.erase(mb);
}

}  // namespace titan::distributed::pipeline
