// Warmup-stable-decay against TorchTitan's formula evaluated by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "titan/components/lr_scheduler.h"

namespace titan::components {
namespace {

config::LrSchedulerSection section(int64_t warmup, std::optional<double> decay_ratio,
                                   std::string type, double min_lr = 0.0) {
  config::LrSchedulerSection s;
  s.warmup_steps = warmup;
  s.decay_ratio = decay_ratio;
  s.decay_type = std::move(type);
  s.min_lr_factor = min_lr;
  return s;
}

TEST(LrScheduler, DebugModelScheduleLinear) {
  // TorchTitan's debug model: 10 steps, warmup 2, decay_ratio 0.8 -> decay 8, stable 0.
  LrScheduler s(section(2, 0.8, "linear"), 8e-4, 10);
  EXPECT_DOUBLE_EQ(s.factor_at(1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.factor_at(2), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.factor_at(3), 1.0 - 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(s.factor_at(10), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 8e-4 * 7.0 / 8.0);
}

TEST(LrScheduler, StablePhaseAndShapes) {
  // 100 steps, warmup 10, decay 20% -> stable steps 11..80, decay 81..100.
  LrScheduler lin(section(10, 0.2, "linear", 0.1), 1.0, 100);
  EXPECT_DOUBLE_EQ(lin.factor_at(50), 1.0);
  EXPECT_DOUBLE_EQ(lin.factor_at(80), 1.0);
  EXPECT_NEAR(lin.factor_at(90), 0.1 + 0.9 * (1 - 10.0 / 20.0), 1e-12);
  EXPECT_NEAR(lin.factor_at(100), 0.1, 1e-12);
  LrScheduler sq(section(10, 0.2, "sqrt"), 1.0, 100);
  EXPECT_NEAR(sq.factor_at(85), 1 - std::sqrt(5.0 / 20.0), 1e-12);
  LrScheduler cos(section(10, 0.2, "cosine"), 1.0, 100);
  EXPECT_NEAR(cos.factor_at(90), 0.5, 1e-12);
}

TEST(LrScheduler, NoDecayRatioDecaysAfterWarmup) {
  LrScheduler s(section(4, std::nullopt, "linear"), 1.0, 20);
  EXPECT_DOUBLE_EQ(s.factor_at(4), 4.0 / 5.0);
  EXPECT_NEAR(s.factor_at(5), 1.0 - 1.0 / 16.0, 1e-12);
}

TEST(LrScheduler, WarmupLongerThanRunIsShortened) {
  LrScheduler s(section(200, std::nullopt, "linear"), 1.0, 10);
  EXPECT_NEAR(s.factor_at(10), 10.0 / 11.0, 1e-12);
}

}  // namespace
}  // namespace titan::components
