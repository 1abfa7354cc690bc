// What a pipeline schedule costs, read off its action lists (schedule.h): how many
// microbatches each rank keeps activations for at its peak, and the bubble (the fraction of
// rank time spent idle) when every action takes a fixed time. The dry run and the planner
// print both; bench/ measures the real bubble against them.
#pragma once

#include <vector>

#include "titan/distributed/pipeline/schedule.h"

namespace titan::distributed::pipeline {

/// For each stage, the most microbatches whose forward it has run and whose backward (B, or
/// W for a split backward) it has not, at any point of its rank's action list.
std::vector<int> peak_in_flight(const Schedule& schedule);

/// Relative time of each kind of action (a backward costs about two forwards).
struct ActionCosts {
  double forward = 1.0;
  double backward = 2.0;        // B
  double backward_input = 1.0;  // I
  double backward_weight = 1.0; // W
};

/// The idle fraction of the ranks over one step, 1 - busy / (pp x makespan), when actions take
/// `costs` and transfers are free; each action starts as soon as its rank is free and its
/// inputs exist. GPipe and 1F1B give (pp - 1) / (microbatches + pp - 1).
double simulated_bubble(const Schedule& schedule, const ActionCosts& costs = {});

}  // namespace titan::distributed::pipeline
