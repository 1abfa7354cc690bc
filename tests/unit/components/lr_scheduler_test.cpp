// The learning-rate schedule against TorchTitan's own: tests/data/torchtitan_lr_schedules.json
// holds the lr of every step that TorchTitan 0.2.2's LRSchedulersContainer gives (recorded by
// scripts/record_torchtitan_lr.py, commit and version in the file), for linear, sqrt and cosine
// decay, with and without decay_ratio and min_lr_factor, and warmup longer than the run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "titan/components/lr_scheduler.h"

namespace titan::components {
namespace unit_components_lr_scheduler_test {

nlohmann::json torchtitan_cases() {
  std::ifstream in(std::string(TITAN_SOURCE_DIR) + "/tests/data/torchtitan_lr_schedules.json");
  return nlohmann::json::parse(in)["cases"];
}

TEST(LrScheduler, EveryStepMatchesTorchTitan) {
  auto cases = torchtitan_cases();
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    config::LrSchedulerSection section;
    section.warmup_steps = c["warmup_steps"];
    if (!c["decay_ratio"].is_null()) section.decay_ratio = c["decay_ratio"].get<double>();
    section.decay_type = c["decay_type"];
    section.min_lr_factor = c["min_lr_factor"];
    const int64_t steps = c["steps"];
    LrScheduler schedule(section, 2.5e-4, steps);
    const auto& expected = c["lr"];
    ASSERT_EQ(static_cast<int64_t>(expected.size()), steps) << c["name"];
    for (int64_t s = 1; s <= steps; ++s) {
      const double want = expected[s - 1].get<double>();
      EXPECT_NEAR(schedule.factor_at(s), want, 1e-12) << c["name"] << " step " << s;
      EXPECT_NEAR(schedule.lr_at(s), 2.5e-4 * want, 1e-16) << c["name"] << " step " << s;
    }
  }
}

// The faults the table pins (issue 12): warmup reaches the configured lr, and the last step
// never trains with lr 0.
TEST(LrScheduler, WarmupReachesTheLrAndTheLastStepTrains) {
  config::LrSchedulerSection section;
  section.warmup_steps = 4;
  LrScheduler schedule(section, 1.0, 10);
  EXPECT_DOUBLE_EQ(schedule.factor_at(4), 1.0);
  EXPECT_GT(schedule.factor_at(10), 0.0);
}

}  // namespace unit_components_lr_scheduler_test
}  // namespace titan::components
