// Validation ([validation]): a held-out loss (the State of the Union corpus) after steps 1 and
// every freq, with the training's tokens per step held fixed (global batch 8 x seq 32, llama3
// debug model, fp32) and the same global validation batch (4 x seq 32, 2 batches). FSDP 2 with
// 1 and 4 accumulation steps, PP 2 (the evaluation schedule over 1F1B's and the V's stages),
// CP 2 and TP 2 log the same validation loss within 1e-6, compile mode within 1e-5: only
// summation orders differ (TorchTitan #1759 scaled it by the accumulation steps). At learning
// rate 0 a validation of the step's own batch equals its training loss, and a MoE model's
// validation counts no expert load (its routing biases train as without validation).
#include <gtest/gtest.h>

#include <fstream>

#include "support/training.h"

namespace titan {
namespace integration_validation_test {

using testing::TrainRun;

const std::string kLlama =
    "--module llama3 --config llama3_debugmodel --training.seq_len 32 "
    "--training.global_batch_size 8 --lr_scheduler.warmup_steps 2 ";

std::string sotu() { return std::string(TITAN_SHARED_DATA) + "/corpora/sotu.txt"; }

std::string validation(int local_batch, int steps = 2, int freq = 2) {
  return " --validation.enable --validation.dataset_path " + sotu() +
         " --validation.seq_len 32 --validation.local_batch_size " + std::to_string(local_batch) +
         " --validation.steps " + std::to_string(steps) + " --validation.freq " +
         std::to_string(freq);
}

std::vector<double> validation_losses(const TrainRun& r) {
  std::vector<double> out;
  for (const auto& record : r.records) {
    if (record.contains("validation_loss")) out.push_back(record["validation_loss"].get<double>());
  }
  return out;
}

TEST(Validation, SameLossUnderAccumulationPipelineContextAndTensorParallel) {
  auto fsdp = testing::train_steps(2, kLlama + "--training.local_batch_size 4" + validation(2), 3);
  const auto expected = validation_losses(fsdp);
  ASSERT_EQ(expected.size(), 2u) << "validations after steps 1 and 2 (freq 2) of 3\n"
                                 << fsdp.command.output;
  EXPECT_FALSE(fsdp.records[2].contains("validation_loss"));
  EXPECT_GT(fsdp.records[0]["validation_tps"].get<double>(), 0);
  EXPECT_NE(fsdp.command.output.find("validate step: 1  loss: "), std::string::npos)
      << fsdp.command.output;
  struct Layout {
    std::string name, args;
    double rtol = 1e-6;
  };
  const std::string pp2 = "--training.local_batch_size 8 --parallelism.pipeline_parallel_degree 2 "
                          "--parallelism.pipeline_parallel_schedule ";
  const std::vector<Layout> layouts = {
      {"FSDP 2, 4 accumulation steps", "--training.local_batch_size 1" + validation(2)},
      {"PP 2 1F1B", pp2 + "1F1B" + validation(4)},
      {"PP 2 ZBVZeroBubble (4 stages in a V)", pp2 + "ZBVZeroBubble" + validation(4)},
      {"CP 2", "--training.local_batch_size 8 --parallelism.context_parallel_degree 2" +
                   validation(4)},
      {"TP 2", "--training.local_batch_size 8 --parallelism.tensor_parallel_degree 2" +
                   validation(4)},
      // The fused kernels round differently (compile_test.cpp: 1e-5) and FSDP prefetches.
      {"FSDP 2, compile mode", "--training.local_batch_size 4 --compile.enable" + validation(2),
       1e-5},
  };
  for (const auto& l : layouts) {
    auto run = testing::train_steps(2, kLlama + l.args, 3);
    const auto losses = validation_losses(run);
    ASSERT_EQ(losses.size(), expected.size()) << l.name << "\n" << run.command.output;
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], expected[i], l.rtol * expected[i]) << l.name << ": validation " << i;
    }
  }
}

TEST(Validation, AtLearningRateZeroItIsTheTrainingLossOfTheSameBatch) {
  auto run = testing::train_steps(
      2,
      kLlama + "--training.local_batch_size 1 --optimizer.lr 0 --validation.enable "
               "--validation.dataset_path " +
          testing::shakespeare() +
          " --validation.seq_len 32 --validation.local_batch_size 4 --validation.steps 1",
      1);
  ASSERT_EQ(run.records.size(), 1u);
  const double loss = run.records[0]["loss"].get<double>();
  EXPECT_NEAR(run.records[0]["validation_loss"].get<double>(), loss, 1e-6 * loss)
      << "4 accumulation steps of 1 sample per rank against one batch of 4";
}

TEST(Validation, CountsNoExpertLoad) {
  const std::string moe =
      "--module qwen3 --config qwen3_moe_debugmodel --model.flavor debugmodel_moe_small "
      "--training.seq_len 32 --training.local_batch_size 2 ";
  auto plain = testing::train_steps(1, moe, 3);
  auto validated = testing::train_steps(1, moe + validation(2, 2, 1), 3);
  testing::expect_same_curves(plain, validated, 0.0, "MoE training with validation");
  for (size_t s = 0; s < plain.records.size(); ++s) {
    EXPECT_EQ(validated.records[s]["expert_load"], plain.records[s]["expert_load"]) << s;
  }
}

TEST(ValidationConfig, BatchesTheLayoutCannotRunAreRefusedBeforeWorkersStart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {validation(2, 0), "validation.steps = 0"},
      {"--parallelism.pipeline_parallel_degree 2 --parallelism.pipeline_parallel_microbatch_size "
       "2" + validation(3),
       "validation.local_batch_size = 3 must be divisible by "
       "parallelism.pipeline_parallel_microbatch_size = 2"},
      {"--parallelism.context_parallel_degree 2 --validation.enable --validation.seq_len 30",
       "validation.seq_len = 30 must divide into the 4 chunks"},
  };
  for (const auto& [args, message] : cases) {
    auto r = testing::run_command("NGPU=2 " + testing::titan_binary() + " launch " + kLlama +
                                  "--training.local_batch_size 4 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("rank0"), std::string::npos) << "a worker started:\n" << r.output;
  }
  // 1,000 bytes (1,002 tokens) hold 30 disjoint windows of 33 tokens: less than one global
  // batch of 64.
  const auto small = testing::make_temp_dir("titan_validation") / "small.txt";
  std::ofstream(small) << std::string(1000, 'a');
  auto tiny = testing::train("OMP_NUM_THREADS=1 NGPU=1",
                             kLlama + "--training.local_batch_size 8 --training.steps 1" +
                                 validation(64, -1) + " --validation.dataset_path " +
                                 small.string());
  EXPECT_NE(tiny.command.exit_code, 0);
  EXPECT_NE(tiny.command.output.find("holds 30 samples of validation.seq_len 32, less than one "
                                     "global validation batch of 64"),
            std::string::npos)
      << tiny.command.output;
}

}  // namespace integration_validation_test
}  // namespace titan
