// The step line and metrics.jsonl: TorchTitan's line, and an unknown peak shown as "n/a" (null
// in JSON), never as a number computed from a guessed peak.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "titan/components/metrics.h"

namespace titan::components {
namespace unit_components_metrics_test {

StepMetrics sample() {
  StepMetrics m;
  m.step = 10;
  m.loss = 5.12344;
  m.grad_norm = 1.23449;
  m.memory_gib = 1.234;
  m.memory_pct = 4.561;
  m.tps = 12345.4;
  m.tflops = 1.234;
  return m;
}

TEST(StepLine, TorchTitansFormatWithMfuOrNa) {
  auto m = sample();
  m.mfu = 12.344;
  EXPECT_EQ(format_step_line(m),
            "step: 10  loss: 5.1234  grad_norm: 1.2345  memory: 1.23GiB(4.56%)  tps: 12,345  "
            "tflops: 1.23  mfu: 12.34%");
  m.mfu.reset();
  EXPECT_EQ(format_step_line(m).substr(format_step_line(m).rfind("mfu")), "mfu: n/a");
}

// Issue 40: the line names the run's last step and the time left (console only).
TEST(StepLine, TotalStepsAndEta) {
  auto m = sample();
  m.mfu = 12.344;
  m.total_steps = 100;
  m.eta_s = 185.2;
  EXPECT_EQ(format_step_line(m),
            "step: 10/100  loss: 5.1234  grad_norm: 1.2345  memory: 1.23GiB(4.56%)  tps: 12,345  "
            "tflops: 1.23  mfu: 12.34%  eta: 3m05s");
  m.eta_s = 7330;
  EXPECT_NE(format_step_line(m).find("eta: 2h02m"), std::string::npos);
  m.eta_s = 4;
  EXPECT_NE(format_step_line(m).find("eta: 4s"), std::string::npos);
}

TEST(MetricsJsonl, UnknownMfuIsNullAndMemoryPeaksAreRecorded) {
  auto path = std::filesystem::temp_directory_path() / "titan_metrics_test" / "metrics.jsonl";
  std::filesystem::remove_all(path.parent_path());
  auto m = sample();
  m.max_active_gib = 1.5;
  m.max_reserved_gib = 2.5;
  m.num_alloc_retries = 3;
  {
    MetricsLogger logger(path.string(), "");
    logger.record(m);
    m.mfu = 40.0;
    logger.record(m);
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto first = nlohmann::json::parse(line);
  EXPECT_TRUE(first["mfu"].is_null());
  EXPECT_EQ(first["max_active_gib"], 1.5);
  EXPECT_EQ(first["max_reserved_gib"], 2.5);
  EXPECT_EQ(first["num_alloc_retries"], 3);
  EXPECT_EQ(first["num_ooms"], 0);
  std::getline(in, line);
  EXPECT_EQ(nlohmann::json::parse(line)["mfu"], 40.0);
  std::filesystem::remove_all(path.parent_path());
}

}  // namespace unit_components_metrics_test
}  // namespace titan::components
