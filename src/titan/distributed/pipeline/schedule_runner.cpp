#include "titan/distributed/pipeline/schedule_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "titan/distributed/pipeline/schedule_stats.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"
#include "titan/platform/clock.h"

namespace titan::distributed::pipeline {
namespace {

// The header sent before each tensor: dtype, number of dimensions, sizes.
constexpr int64_t kMaxDims = 6;

torch::Tensor header_of(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() <= kMaxDims, "pipeline transfers take up to ", kMaxDims, " dimensions");
  auto h = torch::zeros({kMaxDims + 2}, torch::kLong);  // [dtype, ndim, sizes...]
  h[0] = static_cast<int64_t>(t.scalar_type());
  h[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) h[d + 2] = t.size(d);
  return h;
}

using platform::Clock;
using platform::seconds_since;


torch::Tensor empty_from_header(const torch::Tensor& h, torch::Device device) {
  auto v = h.to(torch::kCPU);
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < v[1].item<int64_t>(); ++d) sizes.push_back(v[d + 2].item<int64_t>());
  const auto dtype = static_cast<torch::ScalarType>(v[0].item<int64_t>());
  return torch::empty(sizes, torch::TensorOptions().dtype(dtype).device(device));
}

}  // namespace

ScheduleRunner::ScheduleRunner(PipelinePlan plan, std::shared_ptr<ProcessGroup> pp_group,
                               World& world)
    : plan_(std::move(plan)), group_(std::move(pp_group)), rank_(group_->rank()) {
  if (group_->size() != plan_.schedule.pp) {
    throw std::logic_error(fmt::format("a schedule for {} pipeline ranks on group '{}' of {}",
                                       plan_.schedule.pp, group_->name(), group_->size()));
  }
  // Every rank walks the same list of channels, creating those it is on: two ranks sharing
  // several create them in the same order.
  for (const Channel& c : plan_.schedule.channels()) {
    if (c.from != rank_ && c.to != rank_) continue;
    const int a = group_->ranks().at(c.from), b = group_->ranks().at(c.to);
    channels_[c] = world.new_group({std::min(a, b), std::max(a, b)},
                                   fmt::format("pp_{}_to_{}_{}", c.from, c.to,
                                               c.gradients ? "gradients" : "activations"));
  }
  const auto& s = plan_.schedule;
  std::string mine;
  for (int stage : s.stages_of_rank(rank_)) {
    const auto& p = plan_.stages.at(stage);
    mine += fmt::format("{}stage {} (blocks [{}, {}){}{})", mine.empty() ? "" : ", ", stage,
                        p.first_layer, p.end_layer, p.embedding ? ", embedding" : "",
                        p.output ? ", norm and output" : "");
  }
  log::info("Pipeline schedule {} over {} ranks: {} stages, {} microbatches of {} per local "
            "batch; pipeline rank {} holds {}",
            schedule_name(s.kind), s.pp, s.num_stages, s.microbatches, plan_.microbatch_size,
            rank_, mine);
  if (s.microbatches < s.num_stages) {
    log::warn("{} microbatches for {} pipeline stages: the ranks idle {:.0f}% of the time "
              "(simulated); a larger training.local_batch_size or a smaller "
              "parallelism.pipeline_parallel_microbatch_size fills the pipeline",
              s.microbatches, s.num_stages, 100.0 * simulated_bubble(s));
  }
}

std::vector<models::PartRange> ScheduleRunner::local_pieces() const {
  std::vector<models::PartRange> out;
  for (int s : plan_.schedule.stages_of_rank(rank_)) out.push_back(plan_.stages.at(s));
  return out;
}

void ScheduleRunner::attach(std::vector<ModelPart*> parts) {
  const auto ids = plan_.schedule.stages_of_rank(rank_);
  if (parts.size() != ids.size()) throw std::logic_error("one model part per local stage");
  const auto& actions = plan_.schedule.actions.at(rank_);
  const bool split = std::any_of(actions.begin(), actions.end(),
                                 [](const Action& a) { return a.op == Op::BackwardWeight; });
  for (size_t i = 0; i < ids.size(); ++i) {
    stages_[ids[i]] =
        std::make_unique<PipelineStage>(ids[i], plan_.schedule.num_stages, *parts[i], split);
  }
}

int ScheduleRunner::tag(Flow flow, int stage, int microbatch, int part) const {
  const int slot = stage * walking_->microbatches + microbatch;
  return ((slot * 2) + static_cast<int>(flow)) * 2 + part;
}

std::string ScheduleRunner::describe(Flow flow, const Action& action, bool sending,
                                     int peer) const {
  return fmt::format("pipeline {} {} for action {} (stage {}, microbatch {}) {} pipeline rank {}",
                     flow == Flow::Activation ? "activation" : "gradient",
                     sending ? "send" : "receive", action.str(), action.stage, action.microbatch,
                     sending ? "to" : "from", peer);
}

std::pair<ProcessGroup*, int> ScheduleRunner::channel(int from, int to, Flow flow) const {
  auto& group = *channels_.at(Channel{from, to, flow == Flow::Gradient});
  const int peer = group_->ranks().at(from == rank_ ? to : from);
  return {&group, group.ranks().at(0) == peer ? 0 : 1};
}

torch::Tensor ScheduleRunner::receive(Flow flow, const Action& action, const torch::Tensor& like) {
  const int from = flow == Flow::Activation ? action.stage - 1 : action.stage + 1;
  auto it = local_.find({flow, action.stage, action.microbatch});
  if (it != local_.end()) {
    auto t = it->second;
    local_.erase(it);
    return t;
  }
  const int peer = plan_.schedule.rank_of_stage(from);
  const std::string what = describe(flow, action, false, peer);
  const auto start = Clock::now();
  auto [group, src] = channel(peer, rank_, flow);
  auto header = torch::empty({kMaxDims + 2}, torch::kLong);
  group->recv_(header, src, tag(flow, action.stage, action.microbatch, 0), what);
  auto t = empty_from_header(header, like.device());
  group->recv_(t, src, tag(flow, action.stage, action.microbatch, 1), what);
  wait_seconds_ += seconds_since(start);
  return t;
}

void ScheduleRunner::deliver(Flow flow, int to_stage, const Action& action,
                             const torch::Tensor& t) {
  const int peer = plan_.schedule.rank_of_stage(to_stage);
  if (peer == rank_) {
    local_[{flow, to_stage, action.microbatch}] = t.detach();
    return;
  }
  const std::string what = describe(flow, action, true, peer);
  auto [group, dst] = channel(rank_, peer, flow);
  sends_.push_back({group, group->send(header_of(t), dst,
                                       tag(flow, to_stage, action.microbatch, 0), what)});
  sends_.push_back({group, group->send(t.detach(), dst,
                                       tag(flow, to_stage, action.microbatch, 1), what)});
}

double ScheduleRunner::run(const torch::Tensor& input, const torch::Tensor& labels,
                           double loss_divisor) {
  const auto start = Clock::now();
  const double loss = walk(plan_.schedule, input, labels, loss_divisor);
  run_seconds_ += seconds_since(start);
  ++batches_;
  return loss;
}

double ScheduleRunner::evaluate(const torch::Tensor& input, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  const int microbatches = static_cast<int>(input.size(0) / plan_.microbatch_size);
  auto it = eval_schedules_.find(microbatches);
  if (it == eval_schedules_.end()) {
    it = eval_schedules_.emplace(microbatches, build_eval_schedule(plan_.schedule, microbatches))
             .first;
  }
  const double waited = wait_seconds_;  // summary() is about the training batches
  const double loss = walk(it->second, input, labels, 1.0);
  wait_seconds_ = waited;
  return loss;
}

double ScheduleRunner::walk(const Schedule& schedule, const torch::Tensor& input,
                            const torch::Tensor& labels, double loss_divisor) {
  const auto inputs = input.split(plan_.microbatch_size);  // [mb_size, S] each
  const auto targets = labels.split(plan_.microbatch_size);
  if (static_cast<int>(inputs.size()) != schedule.microbatches) {
    throw std::logic_error(fmt::format("a local batch of {} sequences is not the {} microbatches "
                                       "of {} the pipeline schedule was built for",
                                       input.size(0), schedule.microbatches,
                                       plan_.microbatch_size));
  }
  walking_ = &schedule;
  double loss = 0;
  for (const Action& a : schedule.actions.at(rank_)) {
    auto& stage = *stages_.at(a.stage);
    const size_t mb = static_cast<size_t>(a.microbatch);
    switch (a.op) {
      case Op::Forward: {
        auto x = stage.is_first() ? inputs[mb] : receive(Flow::Activation, a, input);
        auto out = schedule.forward_only
                       ? stage.evaluate(x, targets[mb])
                       : stage.forward(a.microbatch, x, targets[mb], loss_divisor);
        if (stage.is_last()) {
          loss += out.item<double>();
        } else {
          deliver(Flow::Activation, a.stage + 1, a, out);
        }
        break;
      }
      case Op::Backward:
      case Op::BackwardInput: {
        auto grad = stage.is_last() ? torch::Tensor() : receive(Flow::Gradient, a, input);
        auto input_grad = stage.backward(a.microbatch, grad, a.op == Op::Backward);
        if (!stage.is_first()) deliver(Flow::Gradient, a.stage - 1, a, input_grad);
        break;
      }
      case Op::BackwardWeight: stage.backward_weight(a.microbatch); break;
    }
  }
  const auto sends_start = Clock::now();
  for (auto& [group, send] : sends_) group->finish(send);
  sends_.clear();
  wait_seconds_ += seconds_since(sends_start);
  walking_ = &plan_.schedule;
  return loss;
}

std::string ScheduleRunner::summary() const {
  return fmt::format("Pipeline rank {}: waited for its peers {:.3f} s of {:.3f} s in {} batches' "
                     "forward-backward ({:.1f}%; the schedule's simulated bubble is {:.1f}%)",
                     rank_, wait_seconds_, run_seconds_, batches_,
                     run_seconds_ > 0 ? 100.0 * wait_seconds_ / run_seconds_ : 0.0,
                     100.0 * simulated_bubble(plan_.schedule));
}

double ScheduleRunner::sum_over_stages(double value) {
  auto t = torch::tensor({value}, torch::kDouble);
  group_->all_reduce_(t, ReduceOp::Sum, "sum over pipeline stages");
  return t.item<double>();
}

}  // namespace titan::distributed::pipeline
