// The fake-backend dry run: prints the layout, the parameter counts and the memory estimate of
// a 64-rank Qwen3 8B config, and plans it without allocating the model.
#include "titan/train/dry_run.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <tuple>

#include "support/process.h"
#include "titan/components/metrics.h"
#include "titan/config/resolve.h"

namespace titan::train {
namespace unit_train_dry_run_test {

config::JobConfig named(const std::string& module, const std::string& name) {
  return config::resolve(config::parse_command_line({"--module", module, "--config", name}));
}

TEST(DryRun, Qwen3_8BTp4Fsdp16PrintsLayoutParametersAndMemory) {
  std::ostringstream out;
  EXPECT_EQ(dry_run(named("qwen3", "qwen3_8b_tp4_fsdp16_sac"), 64, out), 0);
  const std::string text = out.str();
  for (const char* expected :
       {"dp_shard 16", "tp 4", "world 64", "parameters per rank:", "memory per rank (estimate)",
        "AdamW state", "FSDP gather", "checkpointing selective op", "bfloat16",
        "65,536 tokens per step"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
}

TEST(DryRun, DebugConfigsFitTheirWorld) {
  for (const auto& [module, config] : {std::pair<std::string, std::string>{
                                           "llama3", "llama3_debugmodel_tp2_fsdp2_sac"},
                                       {"qwen3", "qwen3_debugmodel_tp2_fsdp2_sac"},
                                       {"llama3", "llama3_8b_tp4_fsdp16_sac"}}) {
    std::ostringstream out;
    const int world = config.find("debug") != std::string::npos ? 4 : 64;
    EXPECT_EQ(dry_run(named(module, config), world, out), 0) << config;
    EXPECT_NE(out.str().find(world == 4 ? "dp_shard 2" : "dp_shard 16"), std::string::npos)
        << out.str();
  }
}

// MoE configs: total and active parameters, and the routed experts each rank holds (Qwen3
// 30B-A3B: 48 layers x 128 experts x 3 x 768 x 2048 over 64 FSDP shards; DeepSeek 16B: 26 MoE
// layers x 64 experts x 3 x 1408 x 2048 over 64).
TEST(DryRun, MoeConfigsPrintActiveParametersAndExpertsPerRank) {
  for (const auto& [module, config, experts] :
       {std::tuple<std::string, std::string, int64_t>{"qwen3", "qwen3_30b_a3b",
                                                      int64_t{48} * 128 * 3 * 768 * 2048 / 64},
        {"deepseek_v3", "deepseek_v3_16b", int64_t{26} * 64 * 3 * 1408 * 2048 / 64}}) {
    std::ostringstream out;
    EXPECT_EQ(dry_run(named(module, config), 64, out), 0) << config;
    const std::string text = out.str();
    EXPECT_NE(text.find("active per token"), std::string::npos) << text;
    EXPECT_NE(text.find(fmt::format("routed experts per rank: {} parameters",
                                    components::with_commas(experts))),
              std::string::npos)
        << text;
  }
}

// Llama3 8B on 64 ranks as PP 4 x TP 4 x FSDP 4 with 1F1B over 8 microbatches: the stages of
// each pipeline rank (TorchTitan's split: 32 blocks + embedding + output over 4 stages), the
// microbatches each keeps in flight (4, 3, 2, 1) and the bubble (p - 1) / (m + p - 1) = 3/11;
// the breakdown is the heaviest rank's. Under ZBVZeroBubble that rank holds two stages, and its
// memory is theirs together.
TEST(DryRun, PipelinePrintsStagesMicrobatchesInFlightAndBubble) {
  auto job = named("llama3", "llama3_8b_tp4_fsdp16_sac");
  job.parallelism.pipeline_parallel_degree = 4;
  job.parallelism.data_parallel_shard_degree = 4;
  job.parallelism.pipeline_parallel_schedule = "1F1B";
  job.training.local_batch_size = 8;
  job.training.global_batch_size = -1;
  std::ostringstream out;
  EXPECT_EQ(dry_run(job, 64, out), 0);
  const std::string text = out.str();
  for (const char* expected :
       {"pipeline: 1F1B over 4 ranks, 4 stages, 8 microbatches of 1 per local batch; bubble "
        "27.3%",
        "pp rank 0: stage 0 (embedding, blocks [0, 8), 4 microbatch(es) in flight)",
        "pp rank 1: stage 1 (blocks [8, 17), 3 microbatch(es) in flight)",
        "pp rank 3: stage 3 (blocks [25, 32), norm and output, 1 microbatch(es) in flight)",
        "the rank holding the most, pp rank 0 (its stages together)"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
  job.parallelism.pipeline_parallel_schedule = "ZBVZeroBubble";
  std::ostringstream zbv;
  EXPECT_EQ(dry_run(job, 64, zbv), 0);
  // Every rank's line ends "memory X GiB (estimate)"; the breakdown repeats the largest X.
  const std::regex rank_line("pp rank [0-9]: .* memory ([0-9.]+) GiB \\(estimate\\)");
  double most = 0;
  const std::string z = zbv.str();
  for (std::sregex_iterator it(z.begin(), z.end(), rank_line), end; it != end; ++it) {
    most = std::max(most, std::stod((*it)[1]));
  }
  EXPECT_GT(most, 0.0) << z;
  EXPECT_NE(z.find(fmt::format("memory per rank (estimate): {:.2f} GiB", most)), std::string::npos)
      << z;
  EXPECT_EQ(z.find("(pp - 1) / (microbatches + pp - 1)"), std::string::npos) << z;
}

// Runs the binary as run_train.sh would, measuring its wall time and peak resident memory.
TEST(DryRun, ThroughTheLauncherItAllocatesNothing) {
  auto dir = testing::make_temp_dir("titan_dry_run");
  const std::string log = (dir / "out.txt").string();
  const std::string binary = testing::titan_binary();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("COMM_MODE", "fake_backend", 1);
    setenv("NGPU", "64", 1);
    execl(binary.c_str(), binary.c_str(), "launch", "--module", "qwen3", "--config",
          "qwen3_8b_tp4_fsdp16_sac", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  // CPU time, not wall time: other processes on the machine do not count.
  const double cpu_seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                             1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("dp_shard 16"), std::string::npos) << output;
  EXPECT_NE(output.find("memory per rank"), std::string::npos) << output;
  EXPECT_LT(cpu_seconds, 10.0) << output;
  const double peak_gib = usage.ru_maxrss / (1024.0 * 1024.0);  // ru_maxrss: KiB on Linux
  EXPECT_LT(peak_gib, 1.0) << "peak RSS " << peak_gib << " GiB\n" << output;
  std::filesystem::remove_all(dir);
}

}  // namespace unit_train_dry_run_test
}  // namespace titan::train
