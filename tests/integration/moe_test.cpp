// A mixture-of-experts model is validated as users validate a layout: Qwen3-MoE (titan's
// CI-sized debugmodel_moe_small: 2 layers of 8 experts, top 2, load balancing at 1e-3) in fp32
// with tokens per step held fixed (global batch 8 x seq_len 32), 8 steps, against the FSDP 2
// baseline through `titan compare --rtol 1e-4` and within 1e-5 per step: 1 rank, TP 2 x FSDP 2
// (experts replicated, each rank routing its sequence shard), TP 2 without sequence
// parallelism (every rank routing every token), PP 2, and full (bit-equal) and op-level
// activation checkpointing (which must not count tokens twice: the same biases, hence the same
// curves).
// The routing depends on the expert biases, so a layout that balanced on the wrong counts, or
// kept different biases on different ranks, leaves the baseline. DeepSeek-V3's debug flavor
// under TP 2 x FSDP 2 (within 5e-5, set when it ran 20 steps: its grad norm drifted to 1.3e-5
// by step 16 on this project's Xeons with AVX-512 and AMX) and PP 2 likewise, over 6 steps.
// The biases are model state: a stopped and resumed run continues bit for bit and saves the
// same biases.
#include <gtest/gtest.h>

#include "support/checkpoint_files.h"
#include "support/training.h"

namespace titan {
namespace integration_moe_test {

using testing::TrainRun;

const std::string kShape =
    "--training.seq_len 32 --training.global_batch_size 8 --lr_scheduler.warmup_steps 2 ";
const std::string kModel =
    "--module qwen3 --config qwen3_moe_debugmodel "
    "--model.flavor debugmodel_moe_small " +
    kShape;
const std::string kDeepseek = "--module deepseek_v3 --config deepseek_v3_debugmodel " + kShape;

TrainRun run(int ngpu, const std::string& args, int steps = 8, const std::string& model = kModel) {
  return testing::train_steps(ngpu, model + args, steps);
}

void expect_matches_baseline(const TrainRun& fsdp, const TrainRun& other, const std::string& what,
                             double rtol = 1e-5) {
  testing::expect_compare_passes(fsdp, other, what);
  testing::expect_same_curves(fsdp, other, rtol, what);
}

TEST(MoeLayouts, TrainAndMatchTheFsdpBaseline) {
  auto fsdp = run(2, "--training.local_batch_size 4");
  const auto losses = fsdp.losses();
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << "the loss falls";
  for (const auto& record : fsdp.records) {
    ASSERT_TRUE(record.contains("expert_load")) << record.dump();
    for (const char* layer : {"0", "1"}) {
      const auto& load = record["expert_load"][layer];
      EXPECT_GE(load["max"].get<double>(), 1.0);
      EXPECT_LE(load["min"].get<double>(), 1.0);
    }
  }
  expect_matches_baseline(fsdp, run(1, "--training.local_batch_size 8"), "1 rank");
  expect_matches_baseline(fsdp,
                          run(4,
                              "--training.local_batch_size 4 "
                              "--parallelism.tensor_parallel_degree 2"),
                          "TP 2 x FSDP 2");
  expect_matches_baseline(fsdp,
                          run(2,
                              "--training.local_batch_size 8 "
                              "--parallelism.tensor_parallel_degree 2 "
                              "--parallelism.disable_sequence_parallel"),
                          "TP 2 without sequence parallelism");
  expect_matches_baseline(fsdp,
                          run(2,
                              "--training.local_batch_size 8 "
                              "--parallelism.pipeline_parallel_degree 2 "
                              "--parallelism.pipeline_parallel_schedule 1F1B"),
                          "PP 2");
  // Full checkpointing reruns the same ops: bit-equal. Op-level recomputes the gates and norms
  // in backward by another expression order: within the layouts' tolerance, as for dense models.
  auto full = run(2, "--training.local_batch_size 4 --activation_checkpoint.mode full");
  testing::expect_same_curves(fsdp, full, 0.0, "full activation checkpointing");
  EXPECT_EQ(full.records.back()["expert_load"], fsdp.records.back()["expert_load"]);
  expect_matches_baseline(fsdp,
                          run(2,
                              "--training.local_batch_size 4 --activation_checkpoint.mode "
                              "selective --activation_checkpoint.selective_ac_option op"),
                          "op-level selective checkpointing");
}

// DeepSeek-V3's debug flavor (MLA without a q latent, YaRN, 1 dense + 5 MoE layers, softmax top
// 3 of 8, 2 shared experts): TP 2 x FSDP 2 (MLA's heads split) and PP 2 follow FSDP 2 over 6
// steps, and op-level selective checkpointing (MLA's latent norm and the experts' gates
// recomputed).
TEST(MoeLayouts, DeepseekV3TrainsAndMatchesTheFsdpBaseline) {
  constexpr int kDeepseekSteps = 6;  // its runs cost six times Qwen3-MoE's
  auto fsdp = run(2, "--training.local_batch_size 4", kDeepseekSteps, kDeepseek);
  EXPECT_LT(fsdp.losses().back(), 0.8 * fsdp.losses().front()) << "the loss falls";
  EXPECT_EQ(fsdp.records.back()["expert_load"].size(), 5u);
  expect_matches_baseline(fsdp,
                          run(4,
                              "--training.local_batch_size 4 "
                              "--parallelism.tensor_parallel_degree 2",
                              kDeepseekSteps, kDeepseek),
                          "deepseek_v3 TP 2 x FSDP 2", 5e-5);
  expect_matches_baseline(fsdp,
                          run(2,
                              "--training.local_batch_size 8 "
                              "--parallelism.pipeline_parallel_degree 2 "
                              "--parallelism.pipeline_parallel_schedule 1F1B",
                              kDeepseekSteps, kDeepseek),
                          "deepseek_v3 PP 2");
  auto op_sac = run(2,
                    "--training.local_batch_size 4 --activation_checkpoint.mode selective "
                    "--activation_checkpoint.selective_ac_option op",
                    kDeepseekSteps, kDeepseek);
  expect_matches_baseline(fsdp, op_sac, "deepseek_v3 op-level selective checkpointing");
}

TEST(MoeCheckpoint, ExpertBiasesResumeBitExactly) {
  const std::string args =
      "--training.local_batch_size 4 --lr_scheduler.decay_ratio 0 "
      "--checkpoint.enable --checkpoint.interval 3 ";
  auto straight = run(2, args, 6);
  const auto dump = testing::train_resumed(2, kModel + args, 2, kModel + args, 3, 6).dump;
  const auto a = testing::read_checkpoint(straight.dump / "checkpoint" / "step-6", "model");
  const auto b = testing::read_checkpoint(dump / "checkpoint" / "step-6", "model");
  for (const char* name : {"layers.0.moe.expert_bias", "layers.1.moe.expert_bias"}) {
    ASSERT_TRUE(a.count(name) && b.count(name)) << name;
    EXPECT_GT(a.at(name).abs().max().item<float>(), 0.f) << name << " moved";
    EXPECT_TRUE(torch::equal(a.at(name), b.at(name))) << name;
  }
  for (const auto& [name, tensor] : a) EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
}

}  // namespace integration_moe_test
}  // namespace titan
