#include "titan/distributed/pipeline/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "titan/errors.h"

namespace titan::distributed::pipeline {
namespace {

ConfigError schedule_error(ScheduleKind kind, const std::string& why) {
  return ConfigError(fmt::format("parallelism.pipeline_parallel_schedule = {}: {}",
                                 schedule_name(kind), why));
}

// Appends actions to one rank's list, numbering each stage's microbatches per op in order.
class RankActions {
 public:
  void add(Op op, int stage) { actions_.push_back({op, stage, next_[{op, stage}]++}); }
  std::vector<Action> take() { return std::move(actions_); }

 private:
  std::vector<Action> actions_;
  std::map<std::pair<Op, int>, int> next_;
};

std::vector<Action> gpipe_rank(int rank, int microbatches) {
  RankActions a;
  for (int m = 0; m < microbatches; ++m) a.add(Op::Forward, rank);
  for (int m = 0; m < microbatches; ++m) a.add(Op::Backward, rank);
  return a.take();
}

// Stage `rank` of `pp` forwards min(m, pp - rank) microbatches, then alternates backward and
// forward until the forwards are done, then drains the backwards.
std::vector<Action> one_f_one_b_rank(int rank, int pp, int microbatches) {
  RankActions a;
  const int warmup = std::min(microbatches, pp - rank);
  for (int f = 0; f < warmup; ++f) a.add(Op::Forward, rank);
  for (int b = 0, f = warmup; b < microbatches; ++b) {
    a.add(Op::Backward, rank);
    if (f++ < microbatches) a.add(Op::Forward, rank);
  }
  return a.take();
}

// Depth first over the rank's stages r, r + pp, ...: forwards go through the stages in rounds
// of `per_round` microbatches, backwards through them in reverse. The last rank warms up with
// (stages - 1) rounds of forwards, each rank nearer the first two more.
std::vector<Action> interleaved_rank(int rank, int pp, int stages, int microbatches) {
  const int rounds = std::max(1, microbatches / pp);
  const int per_round = microbatches / rounds;
  const int total = stages * microbatches;
  const int warmup = std::min((stages - 1) * per_round + 2 * (pp - 1 - rank), total);
  auto forward_stage = [&](int op) { return (op / per_round) % stages * pp + rank; };
  auto backward_stage = [&](int op) {
    return (stages - 1 - (op - warmup) / per_round % stages) * pp + rank;
  };
  RankActions a;
  for (int op = 0; op < warmup + total; ++op) {
    if (op < total) a.add(Op::Forward, forward_stage(op));
    if (op >= warmup) a.add(Op::Backward, backward_stage(op));
  }
  return a.take();
}

// The V: rank r holds stage r (chunk 0, going down) and stage 2 pp - 1 - r (chunk 1, coming
// back up; the last stage is on rank 0). Warm-up forwards fill both chunks, the steady phase
// runs F, I, W on chunk 0 then chunk 1, the cool-down runs the input gradients first and the
// deferred weight gradients last. Built for at least 2 pp - 1 microbatches; the actions of
// microbatches beyond `microbatches` are then dropped.
std::vector<Action> zbv_rank(int rank, int pp, int microbatches) {
  const int n = std::max(2 * pp - 1, microbatches);
  const int c0 = rank, c1 = 2 * pp - 1 - rank;
  std::vector<Action> out;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto add = [&](Op op, int stage, int& counter) { out.push_back({op, stage, counter++}); };
  auto add_iw = [&](int stage, int& counter) {
    out.push_back({Op::BackwardInput, stage, counter});
    add(Op::BackwardWeight, stage, counter);
  };
  for (int i = 0; i < 2 * (pp - rank) - 1; ++i) add(Op::Forward, c0, f0);
  for (int i = 0; i < rank; ++i) {
    add(Op::Forward, c1, f1);
    add(Op::Forward, c0, f0);
  }
  for (int i = 0; i < pp - rank; ++i) {
    add(Op::Forward, c1, f1);
    add_iw(c1, b1);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) add(Op::Forward, c0, f0);
    add_iw(c0, b0);
    add(Op::Forward, c1, f1);
    add_iw(c1, b1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) {
    add(Op::BackwardInput, c0, b0);
    add(Op::BackwardInput, c1, b1);
  }
  for (int i = 0; i < pp - rank; ++i) {
    add(Op::BackwardInput, c0, b0);
    add(Op::BackwardWeight, c0, w0);
  }
  while (w1 < b1) add(Op::BackwardWeight, c1, w1);
  while (w0 < b0) add(Op::BackwardWeight, c0, w0);
  std::erase_if(out, [&](const Action& a) { return a.microbatch >= microbatches; });
  return out;
}

void check_shape(ScheduleKind kind, int pp, int stages_per_rank, int microbatches) {
  if (pp < 1 || microbatches < 1) {
    throw schedule_error(kind, fmt::format("needs at least one rank and one microbatch, got {} "
                                           "and {}",
                                           pp, microbatches));
  }
  if (!is_multi_stage(kind) && stages_per_rank != 1) {
    throw schedule_error(kind, fmt::format("runs one stage per rank, got {}; choose "
                                           "Interleaved1F1B or ZBVZeroBubble for more",
                                           stages_per_rank));
  }
  if (kind == ScheduleKind::Interleaved1F1B && stages_per_rank < 2) {
    throw schedule_error(kind, fmt::format("needs at least 2 stages per rank, got {}",
                                           stages_per_rank));
  }
  if (kind == ScheduleKind::ZBVZeroBubble && stages_per_rank != 2) {
    throw schedule_error(kind, fmt::format("needs exactly 2 stages per rank (the V), got {}",
                                           stages_per_rank));
  }
  const int rounds = std::max(1, microbatches / pp);
  if (kind == ScheduleKind::Interleaved1F1B && microbatches % rounds != 0) {
    throw schedule_error(kind, fmt::format(
        "runs its {} microbatches (local_batch_size / pipeline_parallel_microbatch_size) in {} "
        "rounds over {} ranks, so they must be a multiple of {}",
        microbatches, rounds, pp, rounds));
  }
}

// --- check_schedule ---------------------------------------------------------------------------

struct Progress {
  explicit Progress(const Schedule& s)
      : stages(s.num_stages), microbatches(s.microbatches),
        forward(size(), false), input_grad(size(), false), weight_grad(size(), false) {}

  size_t size() const { return static_cast<size_t>(stages * microbatches); }
  size_t at(int stage, int mb) const { return static_cast<size_t>(stage * microbatches + mb); }

  // The action `a` waits for, or nullopt when it can run now.
  std::optional<Action> missing(const Action& a) const {
    switch (a.op) {
      case Op::Forward:
        if (a.stage > 0 && !forward[at(a.stage - 1, a.microbatch)]) {
          return Action{Op::Forward, a.stage - 1, a.microbatch};
        }
        return std::nullopt;
      case Op::Backward:
      case Op::BackwardInput:
        if (!forward[at(a.stage, a.microbatch)]) {
          return Action{Op::Forward, a.stage, a.microbatch};
        }
        if (a.stage + 1 < stages && !input_grad[at(a.stage + 1, a.microbatch)]) {
          return Action{Op::BackwardInput, a.stage + 1, a.microbatch};
        }
        return std::nullopt;
      case Op::BackwardWeight:
        if (!input_grad[at(a.stage, a.microbatch)]) {
          return Action{Op::BackwardInput, a.stage, a.microbatch};
        }
        return std::nullopt;
    }
    return std::nullopt;
  }

  void run(const Action& a) {
    const size_t i = at(a.stage, a.microbatch);
    if (a.op == Op::Forward) forward[i] = true;
    if (a.op == Op::Backward || a.op == Op::BackwardInput) input_grad[i] = true;
    if (a.op == Op::Backward || a.op == Op::BackwardWeight) weight_grad[i] = true;
  }

  int stages, microbatches;
  std::vector<bool> forward, input_grad, weight_grad;
};

// Every action on its stage's rank, every (stage, microbatch) forwarded once and backwarded
// once as B or as I + W.
void check_coverage(const Schedule& s) {
  std::map<std::tuple<Op, int, int>, int> count;
  for (int r = 0; r < s.pp; ++r) {
    for (const auto& a : s.actions[r]) {
      if (a.stage < 0 || a.stage >= s.num_stages || a.microbatch < 0 ||
          a.microbatch >= s.microbatches) {
        throw std::logic_error(fmt::format("rank {} runs {}: outside {} stages x {} "
                                           "microbatches",
                                           r, a.str(), s.num_stages, s.microbatches));
      }
      if (s.rank_of_stage(a.stage) != r) {
        throw std::logic_error(fmt::format("rank {} runs {}, but stage {} is on rank {}", r,
                                           a.str(), a.stage, s.rank_of_stage(a.stage)));
      }
      if (++count[{a.op, a.stage, a.microbatch}] > 1) {
        throw std::logic_error(fmt::format("rank {} runs {} twice", r, a.str()));
      }
    }
  }
  for (int stage = 0; stage < s.num_stages; ++stage) {
    for (int mb = 0; mb < s.microbatches; ++mb) {
      auto has = [&](Op op) { return count.count({op, stage, mb}) > 0; };
      if (s.forward_only) {
        if (!has(Op::Forward) || has(Op::Backward) || has(Op::BackwardInput) ||
            has(Op::BackwardWeight)) {
          throw std::logic_error(fmt::format("stage {} microbatch {} is not run exactly once "
                                             "forward and never backward (an evaluation)",
                                             stage, mb));
        }
        continue;
      }
      const bool split = has(Op::BackwardInput) && has(Op::BackwardWeight);
      if (!has(Op::Forward) || split == has(Op::Backward) ||
          (!split && (has(Op::BackwardInput) || has(Op::BackwardWeight)))) {
        throw std::logic_error(fmt::format("stage {} microbatch {} is not run exactly once "
                                           "forward and once backward (B, or I and W)",
                                           stage, mb));
      }
    }
  }
}

}  // namespace

std::string Action::str() const {
  static constexpr char kLetters[] = {'F', 'B', 'I', 'W'};
  return fmt::format("{}{}{}", stage, kLetters[static_cast<int>(op)], microbatch);
}

int Schedule::rank_of_stage(int stage) const {
  if (kind == ScheduleKind::ZBVZeroBubble && stage >= pp) return 2 * pp - 1 - stage;
  return stage % pp;
}

std::vector<int> Schedule::stages_of_rank(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s) {
    if (rank_of_stage(s) == rank) out.push_back(s);
  }
  return out;
}

std::vector<Channel> Schedule::channels() const {
  std::set<Channel> out;
  for (int r = 0; r < pp; ++r) {
    for (const auto& a : actions[r]) {
      const bool backward = a.op == Op::Backward || a.op == Op::BackwardInput;
      if (a.op == Op::Forward && a.stage + 1 < num_stages) {
        out.insert({r, rank_of_stage(a.stage + 1), false});
      }
      if (backward && a.stage > 0) out.insert({r, rank_of_stage(a.stage - 1), true});
    }
  }
  std::erase_if(out, [](const Channel& c) { return c.from == c.to; });
  return {out.begin(), out.end()};
}

std::string Schedule::format() const {
  std::string out;
  for (int r = 0; r < pp; ++r) {
    out += fmt::format("rank {}:", r);
    for (const auto& a : actions[r]) out += fmt::format(" {}", a.str());
    out += "\n";
  }
  return out;
}

Schedule build_schedule(ScheduleKind kind, int pp, int stages_per_rank, int microbatches) {
  check_shape(kind, pp, stages_per_rank, microbatches);
  Schedule s{kind, pp, pp * stages_per_rank, microbatches, {}};
  for (int r = 0; r < pp; ++r) {
    switch (kind) {
      case ScheduleKind::GPipe: s.actions.push_back(gpipe_rank(r, microbatches)); break;
      case ScheduleKind::OneFOneB:
        s.actions.push_back(one_f_one_b_rank(r, pp, microbatches));
        break;
      case ScheduleKind::Interleaved1F1B:
        s.actions.push_back(interleaved_rank(r, pp, stages_per_rank, microbatches));
        break;
      case ScheduleKind::ZBVZeroBubble: s.actions.push_back(zbv_rank(r, pp, microbatches)); break;
    }
  }
  return s;
}

Schedule build_eval_schedule(const Schedule& train, int microbatches) {
  Schedule s{train.kind, train.pp, train.num_stages, microbatches, {}, /*forward_only=*/true};
  for (int r = 0; r < s.pp; ++r) {
    s.actions.emplace_back();
    for (int stage : train.stages_of_rank(r)) {
      for (int mb = 0; mb < microbatches; ++mb) {
        s.actions.back().push_back({Op::Forward, stage, mb});
      }
    }
  }
  check_schedule(s);
  return s;
}

void check_schedule(const Schedule& s) {
  check_coverage(s);
  Progress done(s);
  std::vector<size_t> next(s.pp, 0);
  auto finished = [&] {
    for (int r = 0; r < s.pp; ++r) {
      if (next[r] < s.actions[r].size()) return false;
    }
    return true;
  };
  while (!finished()) {
    bool moved = false;
    for (int r = 0; r < s.pp; ++r) {
      while (next[r] < s.actions[r].size() && !done.missing(s.actions[r][next[r]])) {
        done.run(s.actions[r][next[r]++]);
        moved = true;
      }
    }
    if (moved) continue;
    std::string blocked;
    for (int r = 0; r < s.pp; ++r) {
      if (next[r] == s.actions[r].size()) continue;
      const Action& a = s.actions[r][next[r]];
      const Action wait = *done.missing(a);
      if (s.rank_of_stage(wait.stage) == r) {
        throw std::logic_error(fmt::format("rank {} runs {} before {}, which it holds and must "
                                           "run first",
                                           r, a.str(), wait.str()));
      }
      blocked += fmt::format("; rank {} at {} waits for {} (rank {})", r, a.str(), wait.str(),
                             s.rank_of_stage(wait.stage));
    }
    throw std::logic_error("deadlock" + blocked);
  }
}

}  // namespace titan::distributed::pipeline
