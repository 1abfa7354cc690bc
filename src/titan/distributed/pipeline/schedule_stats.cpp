#include "titan/distributed/pipeline/schedule_stats.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

namespace titan::distributed::pipeline {
namespace {

double cost_of(const Action& a, const ActionCosts& c) {
  switch (a.op) {
    case Op::Forward: return c.forward;
    case Op::Backward: return c.backward;
    case Op::BackwardInput: return c.backward_input;
    case Op::BackwardWeight: return c.backward_weight;
  }
  return 0;
}

// The finish times of the actions an action needs (as check_schedule's rules), or false when
// one has not run yet.
using Finish = std::map<std::tuple<int, int, int>, double>;  // (kind, stage, mb): 0 F, 1 I/B

bool ready(const Action& a, int num_stages, const Finish& done, double& after) {
  auto need = [&](int kind, int stage) {
    auto it = done.find({kind, stage, a.microbatch});
    if (it == done.end()) return false;
    after = std::max(after, it->second);
    return true;
  };
  switch (a.op) {
    case Op::Forward: return a.stage == 0 || need(0, a.stage - 1);
    case Op::Backward:
    case Op::BackwardInput:
      return need(0, a.stage) && (a.stage + 1 == num_stages || need(1, a.stage + 1));
    case Op::BackwardWeight: return need(1, a.stage);
  }
  return false;
}

}  // namespace

std::vector<int> peak_in_flight(const Schedule& s) {
  std::vector<int> peak(s.num_stages, 0), now(s.num_stages, 0);
  for (const auto& actions : s.actions) {
    for (const auto& a : actions) {
      if (a.op == Op::Forward) peak[a.stage] = std::max(peak[a.stage], ++now[a.stage]);
      if (a.op == Op::Backward || a.op == Op::BackwardWeight) --now[a.stage];
    }
  }
  return peak;
}

double simulated_bubble(const Schedule& s, const ActionCosts& costs) {
  Finish done;
  std::vector<size_t> next(s.pp, 0);
  std::vector<double> free_at(s.pp, 0.0);
  double busy = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < s.pp; ++r) {
      double after = free_at[r];
      while (next[r] < s.actions[r].size() &&
             ready(s.actions[r][next[r]], s.num_stages, done, after)) {
        const Action& a = s.actions[r][next[r]++];
        free_at[r] = after + cost_of(a, costs);
        busy += cost_of(a, costs);
        if (a.op != Op::BackwardWeight) {
          done[{a.op == Op::Forward ? 0 : 1, a.stage, a.microbatch}] = free_at[r];
        }
        after = free_at[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < s.pp; ++r) {
    if (next[r] != s.actions[r].size()) {
      throw std::logic_error("simulated_bubble: the schedule does not run to completion");
    }
  }
  const double makespan = *std::max_element(free_at.begin(), free_at.end());
  return 1.0 - busy / (s.pp * makespan);
}

}  // namespace titan::distributed::pipeline
