// Progress lines for long start-up work and validations (issue 40: a validation of the whole
// corpus ran for an hour with nothing on the console).
#include "titan/platform/progress.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/process.h"
#include "titan/platform/logging.h"

namespace titan::platform {
namespace unit_platform_progress_test {

TEST(Progress, DurationsReadAsSecondsMinutesOrHours) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3 * 3600 + 125), "3h02m");
  EXPECT_EQ(format_duration(-1), "0s");
}

TEST(Progress, LinesComeOnlyAfterTheIntervalAndNameTheWorkDoneAndLeft) {
  const auto file = titan::testing::make_temp_dir("titan_progress") / "log.txt";
  log::init(file.string(), /*to_console=*/false, "");
  Progress quiet("never", 10, "batches", /*interval_s=*/3600);
  quiet.update(5);
  Progress every("validating", 10, "batches", /*interval_s=*/0);
  every.update(0);
  every.update(5);
  every.update(10);
  log::init("", /*to_console=*/false, "");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string log = text.str();
  EXPECT_EQ(log.find("never"), std::string::npos) << log;
  EXPECT_NE(log.find("validating: 0/10 batches (0%), 0s spent\n"), std::string::npos) << log;
  EXPECT_NE(log.find("validating: 5/10 batches (50%), 0s spent, about 0s left"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("validating: 10/10 batches (100%), 0s spent, about 0s left"),
            std::string::npos)
      << log;
}

}  // namespace unit_platform_progress_test
}  // namespace titan::platform
