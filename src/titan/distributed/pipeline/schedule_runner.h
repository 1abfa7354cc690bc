// Runs a pipeline schedule on this rank (torch.distributed.pipelining's schedule runtime): the
// local batch is cut into microbatches, and the rank walks its action list (schedule.h),
// receiving each input before an action computes and sending each result as soon as it is
// computed. Sends do not block (they are waited for at the end of the batch), receives do;
// schedules are checked to complete under exactly these rules (check_schedule), so a rank only
// waits on data a peer is about to send. Each channel (a direction between two ranks, for
// activations or for gradients) is a process group of its own, on which every schedule sends
// in the order the peer receives (tested): transports that pair messages in posting order
// (NCCL) need that, and a send blocked on one channel cannot hold up another. A tensor between
// two stages of one rank (the V's turn) is handed over in memory. Every transfer's wait names
// the rank, stage, action and microbatch and is bounded by comm.train_timeout_seconds.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "titan/distributed/forward_backward.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/distributed/pipeline/stage.h"
#include "titan/distributed/process_group.h"

namespace titan::distributed::pipeline {

class ScheduleRunner : public ForwardBackward {
 public:
  /// Runs `plan` over the ranks of `pp_group` (this rank's pipeline), creating its channels'
  /// groups in `world` (collective over the pipeline's ranks).
  ScheduleRunner(PipelinePlan plan, std::shared_ptr<ProcessGroup> pp_group, World& world);

  /// The pieces of this rank's stages, ascending stage order.
  std::vector<models::PartRange> local_pieces() const override;
  void attach(std::vector<ModelPart*> parts) override;
  /// Runs this rank's actions for one local batch [B, S] cut into B / microbatch_size
  /// microbatches; returns the summed loss of its last-stage microbatches (else 0).
  double run(const torch::Tensor& input, const torch::Tensor& labels,
             double loss_divisor) override;
  /// The evaluation schedule (build_eval_schedule) over the local batch [B, S] cut into
  /// microbatches of the training's size; returns the last stage's summed loss (else 0).
  double evaluate(const torch::Tensor& input, const torch::Tensor& labels) override;
  double sum_over_stages(double value) override;
  /// Time this rank waited for its peers (receives and the batch's last sends) against the
  /// time it spent in run(), next to the schedule's simulated bubble.
  std::string summary() const override;

 private:
  enum class Flow { Activation = 0, Gradient = 1 };

  /// Walks this rank's actions of `schedule` over `input` and `labels` cut into its
  /// microbatches; returns the summed loss of its last-stage microbatches.
  double walk(const Schedule& schedule, const torch::Tensor& input, const torch::Tensor& labels,
              double loss_divisor);

  torch::Tensor receive(Flow flow, const Action& action, const torch::Tensor& like);
  void deliver(Flow flow, int to_stage, const Action& action, const torch::Tensor& t);
  int tag(Flow flow, int stage, int microbatch, int part) const;
  /// The group of the channel from pipeline rank `from` to `to` (one of them this rank), and
  /// the other end's rank in it.
  std::pair<ProcessGroup*, int> channel(int from, int to, Flow flow) const;
  std::string describe(Flow flow, const Action& action, bool sending, int peer) const;

  PipelinePlan plan_;
  const Schedule* walking_ = &plan_.schedule;  // the schedule walk() runs (its tags)
  std::map<int, Schedule> eval_schedules_;      // by microbatch count
  std::shared_ptr<ProcessGroup> group_;
  int rank_;  // in the pipeline
  std::map<Channel, std::shared_ptr<ProcessGroup>> channels_;  // those this rank is on
  std::map<int, std::unique_ptr<PipelineStage>> stages_;  // this rank's, by stage index
  std::map<std::tuple<Flow, int, int>, torch::Tensor> local_;  // (flow, stage, mb) handed over
  std::vector<std::pair<ProcessGroup*, PendingWork>> sends_;  // on their channel's group
  double run_seconds_ = 0, wait_seconds_ = 0;
  int64_t batches_ = 0;
};

}  // namespace titan::distributed::pipeline
