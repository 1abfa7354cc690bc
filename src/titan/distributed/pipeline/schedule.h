// Pipeline schedules as data (torch.distributed.pipelining's schedule IR): for every pp rank,
// the list of compute actions it runs in one step, each a (stage, microbatch) forward, full
// backward, input-gradient backward or weight-gradient backward. The runtime (runner.h) walks a
// rank's list; tests print the lists and check them for deadlock freedom and dependency order.
//   GPipe            all forwards, then all backwards (Huang et al. 2019).
//   1F1B             warm-up forwards, then one backward and one forward in turn, then the
//                    remaining backwards (Narayanan et al. 2019, PipeDream-Flush).
//   Interleaved1F1B  several stages per rank placed in a loop (rank r holds r, r + pp, ...),
//                    depth first in rounds of microbatches (Narayanan et al. 2021,
//                    arXiv:2104.04473), PyTorch's flexible variant.
//   ZBVZeroBubble    two stages per rank placed in a V (rank r holds r and 2 pp - 1 - r), the
//                    backward split into input and weight gradients (Qi et al. 2024,
//                    arXiv:2401.10241, section 6).
// The orders are PyTorch's (schedules.py of torch 2.15, checked action by action in
// tests/unit/distributed/pipeline/schedule_test.cpp), without its idle slots.
#pragma once

#include <string>
#include <vector>

#include "titan/config/schedule_kind.h"

namespace titan::distributed::pipeline {

using config::is_multi_stage;
using config::parse_schedule;
using config::schedule_name;
using config::schedule_names;
using config::ScheduleKind;

enum class Op {
  Forward,         // F: the stage's forward (and the loss on the last stage)
  Backward,        // B: input and weight gradients together
  BackwardInput,   // I: the input gradient only (sent on to the previous stage)
  BackwardWeight,  // W: the weight gradients, after the microbatch's I
};

struct Action {
  Op op;
  int stage;
  int microbatch;

  bool operator==(const Action& o) const {
    return op == o.op && stage == o.stage && microbatch == o.microbatch;
  }
  /// PyTorch's notation: stage, op letter, microbatch ("3F1", "0W4").
  std::string str() const;
};

/// A direction of transfers between two ranks: the activations from `from` to `to`, or the
/// gradients.
struct Channel {
  int from, to;
  bool gradients;
  auto operator<=>(const Channel&) const = default;
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int pp = 1;          // ranks
  int num_stages = 1;  // all stages, pp x stages per rank
  int microbatches = 1;
  std::vector<std::vector<Action>> actions;  // [pp rank] -> its actions in execution order
  bool forward_only = false;                 // an evaluation: forwards and no backward

  /// The pp rank holding `stage` (loop placement, or V for ZBVZeroBubble).
  int rank_of_stage(int stage) const;
  /// The stages `rank` holds, ascending.
  std::vector<int> stages_of_rank(int rank) const;
  /// Every channel some action sends on (between two different ranks), in a fixed order.
  std::vector<Channel> channels() const;
  /// One line per rank: "rank 0: 0F0 0F1 0B0 ...".
  std::string format() const;
};

/// The actions of `kind` for `pp` ranks with `stages_per_rank` stages each and `microbatches`
/// microbatches per step. Throws ConfigError naming parallelism.pipeline_parallel_schedule when
/// the schedule cannot run that shape: a single-stage schedule with stages_per_rank != 1, an
/// interleaved one with fewer than 2, ZBVZeroBubble with other than 2, or Interleaved1F1B with
/// microbatches not a multiple of its rounds (max(1, microbatches / pp)).
Schedule build_schedule(ScheduleKind kind, int pp, int stages_per_rank, int microbatches);

/// The evaluation schedule of `train`'s stage placement (torch.distributed.pipelining's eval):
/// each rank runs the forwards of its stages, lowest stage first, each over `microbatches`
/// microbatches in order. A stage needs only the stage below, which its rank (or a lower one)
/// runs first, so it cannot deadlock (checked).
Schedule build_eval_schedule(const Schedule& train, int microbatches);

/// Checks that `schedule` runs to completion with sends that never block and receives that block
/// until their data arrives, every stage on its rank: each (stage, microbatch) forward and backward
/// exactly once (I and W, or B; forward_only: no backward), a forward after the previous stage's
/// forward of its microbatch, a backward after its own forward and the next stage's backward, a W
/// after its I. Throws std::logic_error naming the blocked actions of every rank on a deadlock, or
/// the first action run out of order or missing.
void check_schedule(const Schedule& schedule);

}  // namespace titan::distributed::pipeline
