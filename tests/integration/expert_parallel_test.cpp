// Expert parallelism is validated as users validate a layout: the MoE debug models in fp32 with
// tokens per step held fixed (global batch 8 x seq_len 32) against the FSDP 2 baseline (EP 1)
// through `titan compare --rtol 1e-4` and within 5e-5 per step (an expert's rows arrive grouped by
// source rank, so its GEMMs and gradient sums add in another order; DeepSeek under EP 2 x TP 2
// drifted to 1.04e-5 by step 16 of 20). Qwen3-MoE over 8 steps: EP 2, EP 4, EP 2 x FSDP 2 (experts
// sharded over efsdp 2), EP 2 x TP 2 (ETP 1: the ep group is the tp group, each rank routing its
// sequence shard), EP 2 x CP 2 (each rank routing its chunks of the sequences) and EP 2 x PP 2.
// DeepSeek-V3 (shared experts, dense first layer, MLA), whose runs cost six times Qwen3-MoE's, over
// 5 steps where its shape differs: EP 2, EP 2 x TP 2 (MLA's projections sharded) and EP 2 x PP 2
// (the dense layer in the first stage). At step 1 every layer's expert loads (the max and min of
// its per-expert token counts over the mean) equal the baseline's exactly: a token routed elsewhere
// changes two counts. Checkpoints hold the experts in global coordinates: an EP 2 x FSDP 2 run
// resumes bit-exactly and its checkpoint resumes under FSDP 4 and FSDP 2 without expert
// parallelism.
#include <gtest/gtest.h>

#include "support/training.h"

namespace titan {
namespace integration_expert_parallel_test {

using testing::TrainRun;

const std::string kShape =
    "--training.seq_len 32 --training.global_batch_size 8 --lr_scheduler.warmup_steps 2 ";
const std::string kQwen =
    "--module qwen3 --config qwen3_moe_debugmodel --model.flavor debugmodel_moe_small " + kShape;
const std::string kDeepseek = "--module deepseek_v3 --config deepseek_v3_debugmodel " + kShape;

TrainRun run(const std::string& model, int ngpu, const std::string& args, int steps = 8) {
  return testing::train_steps(ngpu, model + args, steps);
}

enum class Coverage { All, WhereTheShapeDiffers };

void expect_matches_baseline(const TrainRun& fsdp, const TrainRun& ep, const std::string& what) {
  testing::expect_compare_passes(fsdp, ep, what);
  testing::expect_same_curves(fsdp, ep, 5e-5, what);
  ASSERT_FALSE(ep.records.empty()) << what;
  EXPECT_EQ(ep.records.front()["expert_load"], fsdp.records.front()["expert_load"])
      << what << ": the step-1 routing";
  EXPECT_TRUE(ep.records.front().contains("all_to_all_s")) << what;
}

void check_layouts(const std::string& model, Coverage coverage, int steps) {
  const bool all = coverage == Coverage::All;
  auto fsdp = run(model, 2, "--training.local_batch_size 4", steps);
  EXPECT_FALSE(fsdp.records.front().contains("all_to_all_s"));
  const std::string ep2 = "--parallelism.expert_parallel_degree 2 ";
  expect_matches_baseline(fsdp, run(model, 2, ep2 + "--training.local_batch_size 4", steps),
                          "EP 2");
  if (all) {
    expect_matches_baseline(
        fsdp,
        run(model, 4, "--parallelism.expert_parallel_degree 4 --training.local_batch_size 2",
            steps),
        "EP 4");
    expect_matches_baseline(fsdp, run(model, 4, ep2 + "--training.local_batch_size 2", steps),
                            "EP 2 x FSDP 2");
  }
  expect_matches_baseline(
      fsdp,
      run(model, 4, ep2 + "--training.local_batch_size 4 --parallelism.tensor_parallel_degree 2",
          steps),
      "EP 2 x TP 2");
  if (all) {
    expect_matches_baseline(
        fsdp,
        run(model, 4,
            ep2 + "--training.local_batch_size 4 --parallelism.context_parallel_degree 2 "
                  "--parallelism.context_parallel_rotate_method alltoall",
            steps),
        "EP 2 x CP 2");
  }
  expect_matches_baseline(fsdp,
                          run(model, 4,
                              ep2 + "--training.local_batch_size 4 "
                                    "--parallelism.pipeline_parallel_degree 2 "
                                    "--parallelism.pipeline_parallel_schedule 1F1B",
                              steps),
                          "EP 2 x PP 2");
}

TEST(ExpertParallelLayouts, Qwen3MoeMatchesTheFsdpBaseline) {
  check_layouts(kQwen, Coverage::All, 8);
}

TEST(ExpertParallelLayouts, DeepseekV3MatchesTheFsdpBaseline) {
  check_layouts(kDeepseek, Coverage::WhereTheShapeDiffers, 5);
}

TEST(ExpertParallelCheckpoint, ResumesBitExactlyAndUnderOtherLayouts) {
  const std::string args =
      "--training.local_batch_size 2 --lr_scheduler.decay_ratio 0 "
      "--parallelism.expert_parallel_degree 2 --checkpoint.enable --checkpoint.interval 3 ";
  auto straight = run(kQwen, 4, args, 6);
  auto resume = [&](const std::string& first_args, int ngpu, const std::string& second_args) {
    return testing::train_resumed(4, kQwen + first_args, ngpu, kQwen + second_args, 3, 6);
  };
  testing::expect_same_curves(straight, resume(args, 4, args), 0.0, "EP 2 x FSDP 2 resumed");
  const std::string plain =
      "--lr_scheduler.decay_ratio 0 --checkpoint.enable --checkpoint.interval 3 ";
  testing::expect_same_curves(straight, resume(args, 4, plain + "--training.local_batch_size 2"),
                              1e-5, "resumed under FSDP 4");
  testing::expect_same_curves(straight, resume(args, 2, plain + "--training.local_batch_size 4"),
                              1e-5, "resumed under FSDP 2");
}

}  // namespace integration_expert_parallel_test
}  // namespace titan
