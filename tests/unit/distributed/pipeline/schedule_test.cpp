// The pipeline schedules as data: every supported (schedule, pp, stages per rank, microbatches)
// runs to completion in dependency order (check_schedule's simulation), GPipe, Interleaved1F1B
// and ZBVZeroBubble are PyTorch's orders action by action (torch 2.15's own generators, through
// torch_schedule_orders.py), 1F1B is PyTorch's runtime order (its printed order for the last
// rank starts at microbatch 1, so the test spells the runtime's out), and the checker itself
// catches a deadlock, a dependency run out of order and a missing backward.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "support/process.h"
#include "support/skip.h"
#include "titan/distributed/pipeline/schedule.h"
#include "titan/distributed/pipeline/schedule_stats.h"
#include "titan/errors.h"

namespace titan::distributed::pipeline {
namespace unit_distributed_pipeline_schedule_test {

struct Shape {
  ScheduleKind kind;
  int pp, stages_per_rank, microbatches;
};

std::vector<std::string> strings(const std::vector<Action>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) out.push_back(a.str());
  return out;
}

// Every shape the runtime accepts for pp 1..6, up to 4 stages per rank and 16 microbatches.
std::vector<Shape> supported_shapes() {
  std::vector<Shape> out;
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B,
                    ScheduleKind::ZBVZeroBubble}) {
    for (int pp = 1; pp <= 6; ++pp) {
      for (int spr = 1; spr <= 4; ++spr) {
        for (int mb = 1; mb <= 16; ++mb) {
          try {
            build_schedule(kind, pp, spr, mb);
            out.push_back({kind, pp, spr, mb});
          } catch (const ConfigError&) {
          }
        }
      }
    }
  }
  return out;
}

TEST(PipelineSchedule, EverySupportedShapeRunsToCompletionInDependencyOrder) {
  const auto shapes = supported_shapes();
  EXPECT_GT(shapes.size(), 500u);
  for (const auto& s : shapes) {
    const auto schedule = build_schedule(s.kind, s.pp, s.stages_per_rank, s.microbatches);
    EXPECT_NO_THROW(check_schedule(schedule))
        << schedule_name(s.kind) << " pp " << s.pp << " x " << s.stages_per_rank
        << " stages, " << s.microbatches << " microbatches:\n" << schedule.format();
  }
}

// For transports that pair a sender's and a receiver's messages in the order they are posted
// (NCCL), each channel (directed pair of ranks, activations or gradients; schedule_runner.h)
// must see the same sequence of transfers on both ends: the sender's in its action order, the
// receiver's in the order its actions consume them. (ZBVZeroBubble's V sends activations and
// gradients the same way between two ranks, in orders that differ: one channel would not do.)
TEST(PipelineSchedule, EveryChannelReceivesInTheOrderItSends) {
  for (const auto& shape : supported_shapes()) {
    const auto s = build_schedule(shape.kind, shape.pp, shape.stages_per_rank, shape.microbatches);
    // (from rank, to rank, gradient?) -> transfers (stage, mb) in the order sent / received.
    std::map<std::tuple<int, int, bool>, std::vector<std::pair<int, int>>> sent, received;
    for (int r = 0; r < s.pp; ++r) {
      for (const auto& a : s.actions[r]) {
        const bool backward = a.op == Op::Backward || a.op == Op::BackwardInput;
        if (a.op == Op::Forward && a.stage + 1 < s.num_stages) {
          sent[{r, s.rank_of_stage(a.stage + 1), false}].emplace_back(a.stage + 1, a.microbatch);
        }
        if (a.op == Op::Forward && a.stage > 0) {
          received[{s.rank_of_stage(a.stage - 1), r, false}].emplace_back(a.stage, a.microbatch);
        }
        if (backward && a.stage > 0) {
          sent[{r, s.rank_of_stage(a.stage - 1), true}].emplace_back(a.stage - 1, a.microbatch);
        }
        if (backward && a.stage + 1 < s.num_stages) {
          received[{s.rank_of_stage(a.stage + 1), r, true}].emplace_back(a.stage, a.microbatch);
        }
      }
    }
    for (auto& [channel, order] : sent) {
      if (std::get<0>(channel) == std::get<1>(channel)) continue;  // handed over in memory
      EXPECT_EQ(order, received[channel])
          << schedule_name(shape.kind) << " pp " << shape.pp << " x " << shape.stages_per_rank
          << ", " << shape.microbatches << " microbatches: rank " << std::get<0>(channel)
          << " -> " << std::get<1>(channel);
    }
  }
}

TEST(PipelineSchedule, GPipeInterleavedAndZbvArePyTorchsOrders) {
  const std::string python = TITAN_PYTHON;
  if (titan::testing::run_command(python + " -c 'import torch'").exit_code != 0) {
    TITAN_SKIP_OR_FAIL(python + " cannot import torch (TITAN_PYTHON, set by scripts/setup.sh)");
  }
  std::vector<Shape> shapes;
  for (const auto& s : supported_shapes()) {
    if (s.kind != ScheduleKind::OneFOneB && s.pp >= 2 && s.pp <= 4 && s.microbatches <= 12) {
      shapes.push_back(s);
    }
  }
  EXPECT_GT(shapes.size(), 150u);
  std::string cases;
  for (const auto& s : shapes) {
    cases += fmt::format(" {}:{}:{}:{}", schedule_name(s.kind), s.pp, s.stages_per_rank,
                         s.microbatches);
  }
  auto result = titan::testing::run_command(python + " " + TITAN_SOURCE_DIR +
                            "/tests/unit/distributed/pipeline/torch_schedule_orders.py" + cases);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto torch_orders = nlohmann::json::parse(result.output);
  for (const auto& s : shapes) {
    const std::string key = fmt::format("{}:{}:{}:{}", schedule_name(s.kind), s.pp,
                                        s.stages_per_rank, s.microbatches);
    const auto schedule = build_schedule(s.kind, s.pp, s.stages_per_rank, s.microbatches);
    for (int r = 0; r < s.pp; ++r) {
      EXPECT_EQ(strings(schedule.actions[r]),
                torch_orders.at(key).at(std::to_string(r)).get<std::vector<std::string>>())
          << key << " rank " << r;
    }
  }
}

TEST(PipelineSchedule, OneFOneBWarmsUpThenAlternatesThenDrains) {
  auto s = build_schedule(ScheduleKind::OneFOneB, 4, 1, 6);
  using V = std::vector<std::string>;
  EXPECT_EQ(strings(s.actions[0]), (V{"0F0", "0F1", "0F2", "0F3", "0B0", "0F4", "0B1", "0F5",
                                      "0B2", "0B3", "0B4", "0B5"}));
  EXPECT_EQ(strings(s.actions[3]), (V{"3F0", "3B0", "3F1", "3B1", "3F2", "3B2", "3F3", "3B3",
                                      "3F4", "3B4", "3F5", "3B5"}));
  // Fewer microbatches than stages: the warm-up is all of them, then the backwards.
  auto few = build_schedule(ScheduleKind::OneFOneB, 4, 1, 2);
  EXPECT_EQ(strings(few.actions[0]), (V{"0F0", "0F1", "0B0", "0B1"}));
  EXPECT_EQ(strings(few.actions[2]), (V{"2F0", "2F1", "2B0", "2B1"}));
  EXPECT_EQ(strings(few.actions[3]), (V{"3F0", "3B0", "3F1", "3B1"}));
}

TEST(PipelineSchedule, PlacesStagesInALoopOrAV) {
  auto loop = build_schedule(ScheduleKind::Interleaved1F1B, 4, 2, 8);
  EXPECT_EQ(loop.stages_of_rank(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(loop.rank_of_stage(7), 3);
  auto v = build_schedule(ScheduleKind::ZBVZeroBubble, 4, 2, 8);
  EXPECT_EQ(v.stages_of_rank(1), (std::vector<int>{1, 6}));
  EXPECT_EQ(v.rank_of_stage(7), 0);  // the last stage is on the first rank
}

TEST(PipelineSchedule, TheCheckerCatchesDeadlocksOrderAndMissingWork) {
  auto s = build_schedule(ScheduleKind::OneFOneB, 2, 1, 2);
  auto deadlock = s;  // rank 0 waits for a gradient before sending the forward it needs
  deadlock.actions[0] = {{Op::Forward, 0, 0}, {Op::Backward, 0, 0}, {Op::Forward, 0, 1},
                         {Op::Backward, 0, 1}};
  deadlock.actions[1] = {{Op::Forward, 1, 1}, {Op::Backward, 1, 1}, {Op::Forward, 1, 0},
                         {Op::Backward, 1, 0}};
  EXPECT_THROW(
      {
        try {
          check_schedule(deadlock);
        } catch (const std::logic_error& e) {
          EXPECT_NE(std::string(e.what()).find("deadlock; rank 0 at 0B0 waits for 1I0"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      std::logic_error);
  auto order = s;
  std::swap(order.actions[1][0], order.actions[1][1]);  // 1B0 before 1F0
  EXPECT_THROW(check_schedule(order), std::logic_error);
  auto missing = s;
  missing.actions[0].pop_back();
  EXPECT_THROW(check_schedule(missing), std::logic_error);
  auto zbv = build_schedule(ScheduleKind::ZBVZeroBubble, 2, 2, 4);
  for (auto& a : zbv.actions[0]) {  // a W before its I
    if (a == Action{Op::BackwardInput, 3, 0}) a.op = Op::BackwardWeight;
  }
  EXPECT_THROW(check_schedule(zbv), std::logic_error);
}

// Validation's schedule: forwards only, each rank's stages lowest first, for any microbatch
// count (the validation batch need not be the training's); the checker refuses a backward in it
// and a deadlocked order.
TEST(PipelineEvalSchedule, ForwardsOnlyInDependencyOrderOnEveryPlacement) {
  for (const auto& s : supported_shapes()) {
    const auto train = build_schedule(s.kind, s.pp, s.stages_per_rank, s.microbatches);
    for (int microbatches : {1, 3, 8}) {
      const auto eval = build_eval_schedule(train, microbatches);  // checks it
      for (int r = 0; r < s.pp; ++r) {
        ASSERT_EQ(eval.actions[r].size(), train.stages_of_rank(r).size() * microbatches);
        for (const auto& a : eval.actions[r]) EXPECT_EQ(a.op, Op::Forward) << a.str();
      }
    }
  }
  auto v = build_eval_schedule(build_schedule(ScheduleKind::ZBVZeroBubble, 2, 2, 4), 2);
  EXPECT_EQ(strings(v.actions[0]), (std::vector<std::string>{"0F0", "0F1", "3F0", "3F1"}));
  auto backward = v;
  backward.actions[0].push_back({Op::Backward, 3, 0});
  EXPECT_THROW(check_schedule(backward), std::logic_error);
  auto deadlock = v;  // rank 0 runs stage 3 first, which needs rank 1's stage 2, which needs 0
  std::reverse(deadlock.actions[0].begin(), deadlock.actions[0].end());
  EXPECT_THROW(check_schedule(deadlock), std::logic_error);
}

TEST(PipelineSchedule, RefusesShapesItCannotRun) {
  EXPECT_THROW(build_schedule(ScheduleKind::OneFOneB, 2, 2, 4), ConfigError);
  EXPECT_THROW(build_schedule(ScheduleKind::Interleaved1F1B, 2, 1, 4), ConfigError);
  EXPECT_THROW(build_schedule(ScheduleKind::ZBVZeroBubble, 2, 3, 4), ConfigError);
  EXPECT_THROW(build_schedule(ScheduleKind::Interleaved1F1B, 4, 2, 9), ConfigError);
  EXPECT_EQ(parse_schedule("interleaved1f1b"), ScheduleKind::Interleaved1F1B);
  EXPECT_EQ(parse_schedule("zbvzerobubble"), ScheduleKind::ZBVZeroBubble);
  EXPECT_THROW(parse_schedule("DualPipeV"), ConfigError);
}

TEST(PipelineScheduleStats, BubbleAndActivationsInFlight) {
  // GPipe and 1F1B idle (p - 1) / (m + p - 1) of the time; 1F1B holds min(m, p - s)
  // microbatches on stage s where GPipe holds all of them.
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    for (auto [pp, mb] : {std::pair{2, 8}, std::pair{4, 8}, std::pair{4, 2}}) {
      const auto s = build_schedule(kind, pp, 1, mb);
      EXPECT_NEAR(simulated_bubble(s), double(pp - 1) / (mb + pp - 1), 1e-12)
          << schedule_name(kind) << " pp " << pp << " mb " << mb;
      for (int stage = 0; stage < pp; ++stage) {
        EXPECT_EQ(peak_in_flight(s)[stage],
                  kind == ScheduleKind::GPipe ? mb : std::min(mb, pp - stage));
      }
    }
  }
  // Interleaving divides the bubble by about the stages per rank; zero bubble nearly removes
  // it when F, I and W take the same time.
  const double one_f_one_b = simulated_bubble(build_schedule(ScheduleKind::OneFOneB, 4, 1, 8));
  const double interleaved =
      simulated_bubble(build_schedule(ScheduleKind::Interleaved1F1B, 4, 2, 8));
  EXPECT_LT(interleaved, 0.7 * one_f_one_b);
  const double zbv = simulated_bubble(build_schedule(ScheduleKind::ZBVZeroBubble, 4, 2, 8));
  EXPECT_LT(zbv, 0.5 * one_f_one_b);
}

}  // namespace unit_distributed_pipeline_schedule_test
}  // namespace titan::distributed::pipeline
