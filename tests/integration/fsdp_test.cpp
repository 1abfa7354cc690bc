// FSDP is the baseline every other layout is validated against, so it must be exact: the
// llama3 debug model, fp32, the same data and global batch of 8 sequences, 10 steps, trained
// as 1 rank, FSDP 2, FSDP 4, HSDP 2x2, DDP 4 and 1 rank with 4 accumulation steps gives the
// same per-step losses and gradient norms within 1e-4 relative; resharding after forward or
// not, and activation checkpointing (full, every 2nd block, op-level), give the same losses and
// gradient norms; bf16 parameters train to within 2% of fp32's loss over 8 steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/training.h"

namespace titan {
namespace integration_fsdp_test {

using testing::expect_same_curves;
using testing::train;
using testing::TrainRun;

const std::string kCommon =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.global_batch_size 8 --lr_scheduler.warmup_steps 2 ";

TrainRun run(const std::string& env, const std::string& args, int steps = 10) {
  auto r = train(env, kCommon + "--training.steps " + std::to_string(steps) + " " + args);
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  EXPECT_EQ(static_cast<int>(r.records.size()), steps) << r.command.output;
  return r;
}

// Each layout matches the single rank's curves and holds its share of the training state.
void expect_layout(const TrainRun& single, const TrainRun& other, double state_fraction,
                   const std::string& what) {
  expect_same_curves(single, other, 1e-4, what);
  testing::expect_state_fraction(single, other, state_fraction, what);
}

TEST(Fsdp, LayoutsMatchTheSingleRankBaseline) {
  auto single = run("NGPU=1", "--training.local_batch_size 8");
  expect_layout(single, run("NGPU=2", "--training.local_batch_size 4"), 0.5, "FSDP 2");
  expect_layout(single, run("NGPU=4", "--training.local_batch_size 2"), 0.25, "FSDP 4");
  expect_layout(single,
                run("NGPU=4", "--training.local_batch_size 2 "
                              "--parallelism.data_parallel_replicate_degree 2"),
                0.5, "HSDP 2x2");
  expect_layout(single,
                run("NGPU=4", "--training.local_batch_size 2 "
                              "--parallelism.data_parallel_replicate_degree 4"),
                1.0, "DDP 4");
  auto accum = run("NGPU=1", "--training.local_batch_size 2");
  EXPECT_NE(accum.command.output.find("4 accumulation"), std::string::npos)
      << accum.command.output;
  expect_layout(single, accum, 1.0, "1 rank x 4 accumulation steps");
}

TEST(Fsdp, ReshardAfterForwardAndCheckpointingKeepLosses) {
  const std::string fsdp2 = "--training.local_batch_size 4 ";
  auto never = run("NGPU=2", fsdp2 + "--parallelism.fsdp_reshard_after_forward never", 8);
  auto always = run("NGPU=2", fsdp2 + "--parallelism.fsdp_reshard_after_forward always", 8);
  expect_same_curves(never, always, 1e-6, "reshard always vs never");
  auto full = run("NGPU=2", fsdp2 + "--activation_checkpoint.mode full", 8);
  expect_same_curves(never, full, 1e-6, "full activation checkpointing");
  auto every2 = run("NGPU=2", fsdp2 + "--activation_checkpoint.mode selective "
                                      "--activation_checkpoint.selective_ac_option 2 "
                                      "--parallelism.fsdp_reshard_after_forward never", 8);
  expect_same_curves(never, every2, 1e-6, "every 2nd block checkpointed");
  auto op = run("NGPU=2", fsdp2 + "--activation_checkpoint.mode selective "
                                  "--activation_checkpoint.selective_ac_option op", 8);
  expect_same_curves(never, op, 1e-6, "op-level selective checkpointing");
}

TEST(Fsdp, Bf16ParametersTrackFp32) {
  const std::string fsdp2 = "--training.local_batch_size 4 ";
  auto fp32 = run("NGPU=2", fsdp2, 8);
  auto bf16 = run("NGPU=2", fsdp2 + "--training.mixed_precision_param bfloat16", 8);
  double a = fp32.losses().back(), b = bf16.losses().back();
  EXPECT_NEAR(b, a, 0.02 * a) << "fp32 " << a << " vs bf16 " << b;
  // bf16 must really be used: rounding to 8 mantissa bits moves the curve off fp32's.
  double largest = 0;
  for (size_t s = 0; s < fp32.losses().size(); ++s) {
    largest = std::max(largest, std::abs(bf16.losses()[s] - fp32.losses()[s]) / fp32.losses()[s]);
  }
  EXPECT_GT(largest, 1e-4) << "the bf16 run's losses equal fp32's: bf16 was not used";
  EXPECT_NE(bf16.command.output.find("Compute dtype bfloat16"), std::string::npos);
}

}  // namespace integration_fsdp_test
}  // namespace titan
