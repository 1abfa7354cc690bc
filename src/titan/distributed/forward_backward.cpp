#include "titan/distributed/forward_backward.h"

#include <stdexcept>

#include "titan/distributed/context_parallel.h"
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
    auto loss = part_->forward_loss_sum(input, labels) / loss_divisor;
    loss.backward();
    return loss.item<double>();
  }

  double evaluate(const torch::Tensor& input, const torch::Tensor& labels) override {
    torch::NoGradGuard no_grad;
    return part_->forward_loss_sum(input, labels).item<double>();
  }

  double sum_over_stages(double value) override { return value; }

 private:
  ModelPart* part_ = nullptr;
};

// Context parallelism: the ranks of a cp group run their chunks of the same sequences.
class ShardedSequences : public ForwardBackward {
 public:
  ShardedSequences(std::unique_ptr<ForwardBackward> inner, SequenceSplit split, int cp_rank)
      : inner_(std::move(inner)), split_(split), rank_(cp_rank) {}

  std::vector<models::PartRange> local_pieces() const override { return inner_->local_pieces(); }
  void attach(std::vector<ModelPart*> parts) override { inner_->attach(std::move(parts)); }
  double run(const torch::Tensor& input, const torch::Tensor& labels,
             double loss_divisor) override {
    return inner_->run(split_.shard(input, rank_), split_.shard(labels, rank_), loss_divisor);
  }
  double evaluate(const torch::Tensor& input, const torch::Tensor& labels) override {
    return inner_->evaluate(split_.shard(input, rank_), split_.shard(labels, rank_));
  }
  double sum_over_stages(double value) override { return inner_->sum_over_stages(value); }
  std::string summary() const override { return inner_->summary(); }

 private:
  std::unique_ptr<ForwardBackward> inner_;
  SequenceSplit split_;
  int rank_;
};

std::unique_ptr<ForwardBackward> whole_or_pipelined(const config::JobConfig& job,
                                                    const ParallelDims& dims,
                                                    const DeviceMesh& mesh, World& world,
                                                    const SplitFn& split) {
  if (!dims.pp_enabled()) return std::make_unique<WholeModel>();
  return std::make_unique<pipeline::ScheduleRunner>(pipeline::plan_pipeline(job, dims.pp, split),
                                                    mesh[MeshGroup::PP], world);
}

}  // namespace

std::unique_ptr<ForwardBackward> make_forward_backward(const config::JobConfig& job,
                                                       const ParallelDims& dims,
                                                       const DeviceMesh& mesh, World& world,
                                                       const SplitFn& split) {
  auto inner = whole_or_pipelined(job, dims, mesh, world, split);
  if (!dims.cp_enabled()) return inner;
  const SequenceSplit sequences{
      dims.cp, load_balancer_from(job.parallelism.context_parallel_load_balancer)};
  return std::make_unique<ShardedSequences>(std::move(inner), sequences,
                                            mesh[MeshGroup::CP]->rank());
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
