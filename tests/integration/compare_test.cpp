// The validation workflow end to end: train the same global batch on 1 rank and on 2 data-
// parallel ranks, then `titan compare` finds their losses equal within rtol 1e-4.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/process.h"

namespace titan {
namespace integration_compare_test {

using testing::run_command;

std::filesystem::path train(const std::string& ngpu, int local_batch) {
  auto dump = testing::make_temp_dir("titan_compare_run") / ("ngpu" + ngpu);
  auto r = run_command("NGPU=" + ngpu + " " + testing::titan_binary() +
                       " launch --module llama3 --config llama3_debugmodel --training.steps 4 "
                       "--training.seq_len 64 --training.local_batch_size " +
                       std::to_string(local_batch) + " --training.dataset_path " +
                       TITAN_SHARED_DATA "/corpora/tinyshakespeare.txt --metrics.log_freq 1 "
                       "--job.dump_folder " +
                       dump.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dump;
}

TEST(CompareEndToEnd, OneRankAndTwoDataParallelRanksMatchAtTheSameGlobalBatch) {
  auto baseline = train("1", 4);
  auto two_ranks = train("2", 2);
  auto r = run_command(testing::titan_binary() + " compare " + baseline.string() + " " +
                       two_ranks.string() + " --rtol 1e-4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compared 4 step(s)"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(two_ranks / "loss_compare.svg"));
  std::filesystem::remove_all(baseline.parent_path());
  std::filesystem::remove_all(two_ranks.parent_path());
}

}  // namespace integration_compare_test
}  // namespace titan
