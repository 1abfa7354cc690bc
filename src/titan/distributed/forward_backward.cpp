#include "titan/distributed/forward_backward.h"

#include <stdexcept>

#include "titan/distributed/pipeline/schedule_runner.h"

namespace titan::distributed {
namespace {

// The whole model on this rank: one forward, the loss, one backward.
class WholeModel : public ForwardBackward {
 public:
  std::vector<models::PartRange> local_pieces() const override { return {models::PartRange{}}; }

  void attach(std::vector<ModelPart*> parts) override {
    if (parts.size() != 1) throw std::logic_error("the whole model is one model part");
    part_ = parts.front();
  }

  double run(const torch::Tensor& input, const torch::Tensor& labels,
             double loss_divisor) override {
    auto logits = part_->model().forward(input);  // [B, S, V] (V / tp: loss parallelism)
    auto loss = part_->loss_sum(logits, labels) / loss_divisor;
    loss.backward();
    return loss.item<double>();
  }

  double sum_over_stages(double value) override { return value; }

 private:
  ModelPart* part_ = nullptr;
};

}  // namespace

std::unique_ptr<ForwardBackward> make_forward_backward(const config::JobConfig& job,
                                                       const ParallelDims& dims,
                                                       const DeviceMesh& mesh, World& world,
                                                       const SplitFn& split) {
  if (!dims.pp_enabled()) return std::make_unique<WholeModel>();
  return std::make_unique<pipeline::ScheduleRunner>(pipeline::plan_pipeline(job, dims.pp, split),
                                                    mesh["pp"], world);
}

std::vector<models::PartRange> all_pieces(const config::JobConfig& job, const ParallelDims& dims,
                                          const SplitFn& split) {
  if (!dims.pp_enabled()) return {models::PartRange{}};
  return pipeline::plan_pipeline(job, dims.pp, split).stages;
}

int metrics_rank(const config::JobConfig& job, const ParallelDims& dims, const SplitFn& split) {
  if (!dims.pp_enabled()) return 0;
  return dims.first_rank_at_pp(pipeline::plan_pipeline(job, dims.pp, split).last_stage_rank());
}

}  // namespace titan::distributed
