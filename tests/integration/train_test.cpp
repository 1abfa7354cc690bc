// End-to-end training through the launcher users run: loss finite and falling on real text,
// metrics.jsonl and run_manifest.json written; and data-parallel parity: the same global batch
// on 1 rank, 2 ranks, and 1 rank with 2 accumulation steps gives the same per-step losses and
// gradient norms.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <regex>

#include "support/training.h"

namespace titan {
namespace integration_train_test {

using testing::train;
using RunResult = testing::TrainRun;

void expect_learns(const RunResult& r, int steps) {
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(static_cast<int>(r.records.size()), steps) << r.command.output;
  for (const auto& rec : r.records) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "tps", "tflops", "mfu",
                            "memory_gib", "max_active_gib", "max_reserved_gib",
                            "num_alloc_retries", "num_ooms", "tokens_seen", "consumed_samples",
                            "step_time_s", "data_time_s", "cpu_threads"}) {
      ASSERT_TRUE(rec.contains(key)) << key;
    }
    // On the CPU the step line's memory is the peak of live tensors.
    EXPECT_EQ(rec["memory_gib"].get<double>(), rec["max_active_gib"].get<double>());
    EXPECT_TRUE(std::isfinite(rec["loss"].get<double>()));
  }
  std::ifstream manifest_file(r.dump / "run_manifest.json");
  auto manifest = nlohmann::json::parse(manifest_file);
  // The step line's derived values: tflops = tps x FLOPs per token, mfu = tflops / peak with
  // the CPU's peak one thread's GEMM rate x the step's threads, never below what a step
  // reached (issue 40: MFU had read 225%); a step that beat the start's measurement raised it.
  const double flops_per_token = manifest["model"]["flops_per_token"].get<double>();
  const double per_thread = manifest["peak_flops_per_thread"].get<double>();
  const bool raised = r.command.output.find("the peak for MFU is raised") != std::string::npos;
  for (const auto& rec : r.records) {
    const double tflops = rec["tps"].get<double>() * flops_per_token / 1e12;
    EXPECT_NEAR(rec["tflops"].get<double>(), tflops, 1e-9 * tflops);
    EXPECT_LE(rec["mfu"].get<double>(), 100.0 + 1e-9);
    if (raised) continue;
    const double mfu = 100.0 * tflops * 1e12 / (per_thread * rec["cpu_threads"].get<double>());
    EXPECT_NEAR(rec["mfu"].get<double>(), mfu, 1e-9 * mfu);
  }
  double first = r.records.front()["loss"], last = r.records.back()["loss"];
  EXPECT_LT(last, first - 1.0) << "loss did not fall: " << first << " -> " << last;
  EXPECT_NE(r.command.output.find("step: 1/12  loss: "), std::string::npos) << r.command.output;
  EXPECT_EQ(manifest["world"]["world_size"], 2);
  EXPECT_EQ(manifest["device"]["type"], "cpu");
  EXPECT_EQ(manifest["data"]["files"][0]["bytes"], 1115394);
  const auto& versions = manifest["versions"];
  EXPECT_FALSE(versions["libtorch"].get<std::string>().empty());
  // The revision of this checkout (a 7+ hex-digit git hash, "-dirty" when it had changes).
  EXPECT_TRUE(std::regex_search(versions["titan_git_revision"].get<std::string>(),
                                std::regex("^[0-9a-f]{7,}")))
      << versions.dump();
  EXPECT_EQ(versions["compiler"].get<std::string>().rfind("g++ ", 0), 0u) << versions.dump();
  EXPECT_TRUE(versions["blas"]["optimized"].get<bool>()) << versions.dump();
  EXPECT_FALSE(versions["blas"]["library"].get<std::string>().empty()) << versions.dump();
  EXPECT_TRUE(std::filesystem::exists(r.dump / "logs" / "rank_1.log"));
}

TEST(Train, Llama3DebugModelTwoRanksLearns) {
  auto r = train("NGPU=2", "--module llama3 --config llama3_debugmodel --training.steps 12 "
                           "--training.seq_len 128 --training.local_batch_size 4");
  expect_learns(r, 12);
}

// Issue 40: bf16 parameters on a CPU without bf16 units had logged mfu 133%..225% against a
// bf16 GEMM peak; the peak is now one thread's fastest GEMM (fp32 or bf16) x the threads, and a
// stretch that beats it raises it: MFU stays at or below 100%. Also the run says what it
// computes and where it is (step N/M, eta), and a finished run rerun trains nothing.
TEST(Train, Bf16MfuNeverExceedsAHundredPercentAndTheLineShowsProgress) {
  const auto dump = testing::make_temp_dir("titan_bf16");
  const std::string args =
      "--module llama3 --training.steps 3 --training.seq_len 64 --training.local_batch_size 2 "
      "--training.mixed_precision_param bfloat16 --checkpoint.enable --checkpoint.interval 3";
  auto r = train("OMP_NUM_THREADS=1 NGPU=2", args, dump);
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  ASSERT_EQ(r.records.size(), 3u) << r.command.output;
  for (const auto& rec : r.records) {
    EXPECT_GT(rec["mfu"].get<double>(), 0.0);
    EXPECT_LE(rec["mfu"].get<double>(), 100.0 + 1e-9) << rec.dump();
    EXPECT_FALSE(rec.contains("eta")) << "console only";
  }
  EXPECT_NE(r.command.output.find("Computing llama3 debugmodel, parameters in bfloat16"),
            std::string::npos)
      << r.command.output;
  EXPECT_TRUE(std::regex_search(r.command.output, std::regex("step: 2/3  loss: .*  eta: \\d+s")))
      << r.command.output;
  auto again = train("OMP_NUM_THREADS=1 NGPU=2", args, dump);
  EXPECT_EQ(again.command.exit_code, 0) << again.command.output;
  EXPECT_NE(again.command.output.find("Nothing to train: the run resumed after step 3, and "
                                      "training.steps is 3"),
            std::string::npos)
      << again.command.output;
  EXPECT_EQ(again.command.output.find("Training starts at step 4"), std::string::npos);
}

TEST(Train, Qwen3DebugModelTwoRanksLearns) {
  auto r = train("NGPU=2", "--module qwen3 --config qwen3_debugmodel --training.steps 12 "
                           "--training.seq_len 64 --training.local_batch_size 4");
  expect_learns(r, 12);
}

// The shipped 4-rank TP 2 x FSDP 2 configs train with op-level selective checkpointing, gradient
// accumulation and bf16 parameters together (README: "the *_debugmodel_tp2_fsdp2_sac ones ...
// train").
TEST(Train, Tp2Fsdp2SacConfigsTrainWithAccumulationAndBf16) {
  for (const std::string module : {"llama3", "qwen3"}) {
    auto r = train("NGPU=4", "--module " + module + " --config " + module +
                                 "_debugmodel_tp2_fsdp2_sac --training.steps 2 "
                                 "--training.seq_len 64 --training.local_batch_size 2 "
                                 "--training.global_batch_size 8 "
                                 "--training.mixed_precision_param bfloat16");
    ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
    ASSERT_EQ(r.records.size(), 2u) << r.command.output;
    for (const auto& rec : r.records) EXPECT_TRUE(std::isfinite(rec["loss"].get<double>()));
    for (std::string text : {"tp 2", "2 accumulation", "Compute dtype bfloat16",
                             "activation checkpointing 'selective'"}) {
      EXPECT_NE(r.command.output.find(text), std::string::npos) << module << ": " << text;
    }
  }
}

// A rank of 2 threads sharing the cores with a CPU-bound process drops to 1 thread during the
// run (platform/cpu_threads.h): the switch is logged and metrics.jsonl records it.
TEST(Train, ARankFollowsTheCoresAnotherProcessLeavesFree) {
  const pid_t spinner = fork();
  if (spinner == 0) {
    for (;;) {
    }
  }
  auto r = train("NGPU=1 OMP_NUM_THREADS=2",
                 "--module llama3 --config llama3_debugmodel --training.steps 8 "
                 "--training.seq_len 256 --training.local_batch_size 2");
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  EXPECT_NE(r.command.output.find("1 OpenMP thread(s) from now on (was 2"), std::string::npos)
      << r.command.output;
  ASSERT_FALSE(r.records.empty());
  EXPECT_EQ(r.records.back()["cpu_threads"].get<int>(), 1);
}

TEST(Train, SameGlobalBatchSameLossesAcrossLayouts) {
  const std::string common = "--module llama3 --config llama3_debugmodel --training.steps 5 "
                             "--training.seq_len 64 --training.global_batch_size 8 ";
  auto one = train("NGPU=1", common + "--training.local_batch_size 8");
  auto two = train("NGPU=2", common + "--training.local_batch_size 4");
  auto accum = train("NGPU=1", common + "--training.local_batch_size 4");
  for (const auto* r : {&one, &two, &accum}) {
    ASSERT_EQ(r->command.exit_code, 0) << r->command.output;
    ASSERT_EQ(r->records.size(), 5u) << r->command.output;
  }
  EXPECT_NE(accum.command.output.find("2 accumulation"), std::string::npos) << accum.command.output;
  testing::expect_same_curves(one, two, 1e-5, "2 ranks");
  testing::expect_same_curves(one, accum, 1e-5, "2 accumulation steps");
}

}  // namespace integration_train_test
}  // namespace titan
