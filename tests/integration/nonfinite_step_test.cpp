// Non-finite steps (training.on_nonfinite), with a NaN gradient injected on rank 1 in step 3 of
// FSDP 2 training (the TITAN_TEST_NAN_AT hook; the gradient norm is global, so both ranks see
// it):
// - "skip": the step logs grad_norm nan (null in metrics.jsonl) and a skip counter; its update
//   is skipped, so step 3's checkpoint holds exactly step 2's weights and optimizer state while
//   the data moved on by its batch, and training continues with finite losses;
// - "stop" (the default): the run stops naming the step, before the update, so no checkpoint
//   of step 3 exists and the weights of the last one are finite; the launcher does not restart
//   it (exit code 4).
#include <gtest/gtest.h>

#include "support/checkpoint_files.h"
#include "support/training.h"

namespace titan {
namespace integration_nonfinite_step_test {

const std::string kArgs =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.local_batch_size 4 --checkpoint.enable --checkpoint.interval 1 "
    "--checkpoint.keep_latest_k 0 ";
const std::string kEnv = "OMP_NUM_THREADS=1 NGPU=2 TITAN_TEST_NAN_AT=1:3";

void expect_same_tensors(const components::TensorMap& a, const components::TensorMap& b,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << what << " " << name;
    EXPECT_TRUE(torch::equal(t, b.at(name))) << what << " " << name;
  }
}

nlohmann::json train_state(const std::filesystem::path& step_dir) {
  std::ifstream in(step_dir / "metadata.json");
  return nlohmann::json::parse(in);
}

TEST(NonfiniteStep, SkipLeavesWeightsAndOptimizerAsTheStepBeforeAndMovesTheData) {
  auto r = testing::train(kEnv, kArgs + "--training.on_nonfinite skip --training.steps 5");
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(r.records.size(), 5u);
  EXPECT_TRUE(r.records[2]["grad_norm"].is_null()) << r.records[2].dump();
  EXPECT_NE(r.command.output.find("step 3: loss"), std::string::npos) << r.command.output;
  EXPECT_NE(r.command.output.find("grad_norm: nan"), std::string::npos) << r.command.output;
  EXPECT_NE(r.command.output.find("skipped: 1"), std::string::npos);
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(r.records[s]["skipped_steps"].get<int64_t>(), s < 2 ? 0 : 1) << "step " << s + 1;
    EXPECT_TRUE(std::isfinite(r.records[s]["loss"].get<double>())) << "step " << s + 1;
    EXPECT_EQ(r.records[s]["consumed_samples"].get<int64_t>(), 8 * (s + 1));
  }
  const auto ckpt = r.dump / "checkpoint";
  for (const char* section : {"model", "optimizer"}) {
    expect_same_tensors(testing::read_checkpoint(ckpt / "step-2", section),
                        testing::read_checkpoint(ckpt / "step-3", section), section);
  }
  const auto model4 = testing::read_checkpoint(ckpt / "step-4", "model");
  for (const auto& [name, t] : model4) EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
  EXPECT_FALSE(torch::equal(model4.begin()->second,
                            testing::read_checkpoint(ckpt / "step-3", "model").begin()->second));
  EXPECT_NE(train_state(ckpt / "step-3").dump().find("\"skipped_steps\":1"), std::string::npos);
}

// Not restarted either (exit code 4): a restart would only meet the same step again.
TEST(NonfiniteStep, StopNamesTheStepBeforeItsUpdate) {
  auto r = testing::train(kEnv + " MAX_RESTARTS=2", kArgs + "--training.steps 5");
  EXPECT_EQ(r.command.exit_code, 4) << r.command.output;
  EXPECT_EQ(r.command.output.find("restart 1"), std::string::npos) << r.command.output;
  EXPECT_NE(r.command.output.find("step 3: loss"), std::string::npos) << r.command.output;
  EXPECT_NE(r.command.output.find("training.on_nonfinite = stop"), std::string::npos);
  const auto ckpt = r.dump / "checkpoint";
  EXPECT_TRUE(std::filesystem::exists(ckpt / "step-2"));
  EXPECT_FALSE(std::filesystem::exists(ckpt / "step-3"));
  for (const auto& [name, t] : testing::read_checkpoint(ckpt / "step-2", "model")) {
    EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
  }
}

}  // namespace integration_nonfinite_step_test
}  // namespace titan
