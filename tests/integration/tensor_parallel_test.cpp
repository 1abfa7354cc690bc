// Tensor parallelism is validated as users validate a new layout: against the 1D FSDP baseline with
// tokens per step held fixed (global batch 8 x seq_len 32), through `titan compare --rtol 1e-4`
// (losses and gradient norms) over 6 steps (qwen3: 4). llama3 and qwen3 debug models, fp32, the
// same data; TP 2, TP 4 and TP 2 x FSDP 2, each with sequence and loss parallelism on and off, and
// TP 2 x HSDP 2x2 (8 ranks) once. Beyond compare's tolerance, losses and gradient norms must agree
// within 1e-5 and the first step's gradient norm (same weights, same batch) within 1e-6: only the
// summation order differs, and a misplaced gradient (e.g. a replicated norm weight reduced into the
// wrong parameter) shows there long before 1e-4. Each layout must also hold its share of the
// per-rank training state (a plan that left the weights whole would not).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "support/training.h"

namespace titan {
namespace integration_tensor_parallel_test {

using testing::run_command;
using testing::titan_binary;
using testing::train;
using testing::TrainRun;

TrainRun run(const std::string& model, int ngpu, const std::string& args) {
  const int steps = model == "qwen3" ? 4 : 6;  // qwen3's runs cost four times llama3's
  auto r = train("NGPU=" + std::to_string(ngpu),
                 "--module " + model + " --config " + model + "_debugmodel " +
                     "--training.seq_len 32 --training.global_batch_size 8 "
                     "--lr_scheduler.warmup_steps 2 --training.steps " + std::to_string(steps) +
                     " " + args);
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  EXPECT_EQ(r.records.size(), static_cast<size_t>(steps)) << r.command.output;
  return r;
}

// `other` matches the FSDP 2 baseline and holds `state_fraction` of its per-rank state.
void expect_matches_baseline(const TrainRun& fsdp, const TrainRun& other, double state_fraction,
                             const std::string& what) {
  testing::expect_state_fraction(fsdp, other, state_fraction, what);
  testing::expect_compare_passes(fsdp, other, what);
  testing::expect_same_curves(fsdp, other, 1e-5, what);
  double g0 = fsdp.records[0]["grad_norm"].get<double>();
  double g1 = other.records[0]["grad_norm"].get<double>();
  EXPECT_NEAR(g1, g0, 1e-6 * g0) << what << ": step 1 gradient norm";
}

// (model, extra flags for every TP run)
class TensorParallelLayouts
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TensorParallelLayouts, MatchTheFsdpBaseline) {
  const auto& [model, flags] = GetParam();
  auto fsdp = run(model, 2, "--training.local_batch_size 4");
  const std::string tp2 = "--parallelism.tensor_parallel_degree 2 " + flags;
  expect_matches_baseline(fsdp, run(model, 2, "--training.local_batch_size 8 " + tp2), 1.0,
                          "TP 2");
  expect_matches_baseline(fsdp,
                          run(model, 4, "--training.local_batch_size 8 "
                                        "--parallelism.tensor_parallel_degree 4 " + flags),
                          0.5, "TP 4");
  expect_matches_baseline(fsdp, run(model, 4, "--training.local_batch_size 4 " + tp2), 0.5,
                          "TP 2 x FSDP 2");
  if (model == "llama3" && flags.empty()) {  // 8 ranks: once
    expect_matches_baseline(fsdp,
                            run(model, 8, "--training.local_batch_size 2 "
                                          "--parallelism.data_parallel_replicate_degree 2 " +
                                          tp2),
                            0.5, "TP 2 x HSDP 2x2");
  }
}

const char* kPlainTp = "--parallelism.disable_sequence_parallel --parallelism.disable_loss_parallel";

INSTANTIATE_TEST_SUITE_P(
    Models, TensorParallelLayouts,
    ::testing::Combine(::testing::Values("llama3", "qwen3"), ::testing::Values("", kPlainTp)),
    [](const auto& info) {
      return std::get<0>(info.param) +
             (std::get<1>(info.param).empty() ? "_sequence_and_loss_parallel" : "_plain");
    });

TEST(TensorParallel, IndivisibleLayoutsAreRefusedBeforeWorkersStart) {
  auto heads = run_command("NGPU=3 " + titan_binary() + " launch --module llama3 --config "
                           "llama3_debugmodel --parallelism.tensor_parallel_degree 3");
  EXPECT_EQ(heads.exit_code, 2) << heads.output;
  EXPECT_NE(heads.output.find("tensor_parallel_degree = 3 does not divide the model's query "
                              "heads (16)"),
            std::string::npos)
      << heads.output;
  auto seq = run_command("NGPU=4 " + titan_binary() + " launch --module llama3 --config "
                         "llama3_debugmodel --parallelism.tensor_parallel_degree 4 "
                         "--training.seq_len 66");
  EXPECT_EQ(seq.exit_code, 2) << seq.output;
  EXPECT_NE(seq.output.find("training.seq_len (66)"), std::string::npos) << seq.output;
  EXPECT_EQ(seq.output.find("rank0"), std::string::npos) << "a worker started:\n" << seq.output;
}

}  // namespace integration_tensor_parallel_test
}  // namespace titan
