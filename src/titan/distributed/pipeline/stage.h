// One pipeline stage on this rank (torch.distributed.pipelining's PipelineStage): a model part
// and the microbatches in flight through it. Forward keeps each microbatch's input and output
// until its backward; a backward takes the gradient of the output (none on the last stage,
// whose output is the loss) and returns the gradient of the input for the previous stage.
// The backward runs whole (B) or split in two (zero-bubble schedules): I computes only the input
// gradient and keeps the graph, W then the weight gradients. The ops with weights defer theirs
// during I (platform/deferred_weight_grad.h), so W is their weight GEMMs (and the norms' and the
// loss's gradients I already had); only parameters reached by other ops (the eager RMSNorm, a
// checkpointed block) take the engine's walk of the graph again. The numbers are B's. The first
// stage's input is tokens: its I differentiates the parameters no op defers instead (the
// embedding), which takes it through every layer.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>

#include "titan/distributed/model_part.h"
#include "titan/platform/deferred_weight_grad.h"

namespace titan::distributed::pipeline {

class PipelineStage {
 public:
  /// Stage `index` of `num_stages`, computing with `part` (parallelized and initialised);
  /// `split_backward` when the schedule runs its backwards as I and W.
  PipelineStage(int index, int num_stages, ModelPart& part, bool split_backward);

  int index() const { return index_; }
  bool is_first() const { return index_ == 0; }
  bool is_last() const { return index_ == num_stages_ - 1; }

  /// F of microbatch `mb`: input [mb_size, S] tokens on the first stage, else the previous
  /// stage's output (hidden states [mb_size, S', dim]). Returns the output to send on, or on the
  /// last stage the loss: the summed cross-entropy against labels [mb_size, S] divided by
  /// `loss_divisor` (a scalar).
  torch::Tensor forward(int mb, const torch::Tensor& input, const torch::Tensor& labels,
                        double loss_divisor);
  /// An evaluation's forward (no gradients, nothing kept): the output to send on, or on the
  /// last stage the summed cross-entropy against labels.
  torch::Tensor evaluate(const torch::Tensor& input, const torch::Tensor& labels);
  /// B (`weights_too`) or I of microbatch `mb` from the gradient of its output (undefined on
  /// the last stage). Returns the gradient of its input, undefined on the first stage.
  torch::Tensor backward(int mb, const torch::Tensor& output_grad, bool weights_too);
  /// W of microbatch `mb`, after its I: the weight gradients, accumulated into the part's
  /// parameters.
  void backward_weight(int mb);

 private:
  struct InFlight {
    torch::Tensor input;        // requires grad, except the first stage's tokens
    torch::Tensor output;       // hidden states, or the loss on the last stage
    torch::Tensor output_grad;  // kept from I for W
    std::unique_ptr<platform::WeightGradRecorder> deferred;  // the weight gradients I deferred
    std::vector<torch::Tensor> input_pass_params;  // given their gradients by I (first stage)
  };
  InFlight& in_flight(int mb, const char* action);

  int index_;
  int num_stages_;
  ModelPart& part_;
  bool split_backward_;
  std::map<int, InFlight> in_flight_;  // by microbatch
  bool weight_pass_logged_ = false;
};

}  // namespace titan::distributed::pipeline
