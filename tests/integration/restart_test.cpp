// Launcher restarts (MAX_RESTARTS) over 16 steps with a checkpoint every 5 (llama3 debug model,
// seq 64, FSDP 2). A rank killed with SIGKILL (the TITAN_TEST_KILL_AT hook, which fires in the
// first start only) at a random step, or in the middle of a save (its files written, the
// checkpoint not complete), makes the launcher start every worker again; they resume from the
// latest complete checkpoint and finish, and every step logged, the first start's and the
// repeated ones, has the loss and gradient norm of an uninterrupted run. The manifest records
// the restart. Without restarts left the launcher gives up with the failing rank's signal.
// Two launchers (NNODES=2, one rank each: the same world of 2) restart together when a rank on
// either node dies, node 0's (which hosts the launchers' store) or node 1's.
#include <gtest/gtest.h>

#include <future>
#include <random>
#include <regex>

#include "support/training.h"

namespace titan {
namespace integration_restart_test {

constexpr int kSteps = 16;
const std::string kArgs =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.local_batch_size 4 --checkpoint.enable --checkpoint.interval 5 "
    "--training.steps " + std::to_string(kSteps) + " ";

// The step `run` resumed from ("Resumed from .../step-N"), or 0.
int resumed_from(const testing::TrainRun& run) {
  std::smatch m;
  static const std::regex line("Resumed from \\S*step-([0-9]+)");
  return std::regex_search(run.command.output, m, line) ? std::stoi(m[1]) : 0;
}

void expect_restarted_like(const testing::TrainRun& whole, const testing::TrainRun& run,
                           const std::string& what) {
  ASSERT_EQ(run.command.exit_code, 0) << what << "\n" << run.command.output;
  EXPECT_NE(run.command.output.find("titan launch: restart 1 of 2 (MAX_RESTARTS)"),
            std::string::npos)
      << what << "\n"
      << run.command.output;
  const int resume = resumed_from(run);
  EXPECT_GT(resume, 0) << what << "\n" << run.command.output;
  for (const auto& record : run.records) {
    const int step = record["step"].get<int>();
    ASSERT_GE(step, 1);
    ASSERT_LE(step, kSteps);
    EXPECT_EQ(record["loss"], whole.records[step - 1]["loss"]) << what << " step " << step;
    EXPECT_EQ(record["grad_norm"], whole.records[step - 1]["grad_norm"]) << what;
  }
  // Every step after the resume point was logged once the run restarted.
  ASSERT_GE(run.records.size(), static_cast<size_t>(kSteps - resume)) << what;
  for (int i = 0; i < kSteps - resume; ++i) {
    const auto& record = run.records[run.records.size() - (kSteps - resume) + i];
    EXPECT_EQ(record["step"].get<int>(), resume + 1 + i) << what;
  }
  std::ifstream manifest(run.dump / "run_manifest.json");
  EXPECT_EQ(nlohmann::json::parse(manifest)["restart_count"].get<int>(), 1) << what;
}

class LauncherRestart : public ::testing::Test {
 protected:
  // The uninterrupted run every restarted one is compared with.
  static void SetUpTestSuite() {
    whole_ = new testing::TrainRun(testing::train_steps(2, kArgs, kSteps));
  }
  static void TearDownTestSuite() { delete whole_; }
  static const testing::TrainRun& whole() { return *whole_; }

 private:
  static inline testing::TrainRun* whole_ = nullptr;
};

TEST_F(LauncherRestart, AKilledRankResumesFromTheLatestCheckpointWithTheSameLosses) {
  std::mt19937 rng(20261204);
  const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
  const int step = std::uniform_int_distribution<int>(6, kSteps - 1)(rng);  // after a checkpoint
  // Then mid-save: step-10 stays incomplete, step 5 is the latest.
  const std::string random_kill = std::to_string(rank) + ":" + std::to_string(step);
  for (const std::string& kill : {random_kill, std::string("1:10:save")}) {
    auto run =
        testing::train("OMP_NUM_THREADS=1 NGPU=2 MAX_RESTARTS=2 TITAN_TEST_KILL_AT=" + kill, kArgs);
    expect_restarted_like(whole(), run, "killed at " + kill);
    if (kill == "1:10:save") {
      EXPECT_EQ(resumed_from(run), 5) << run.command.output;
    }
  }
}

// Node `node_rank` of two (one rank each) in `dump`; the rank of `kill` dies in the first start.
testing::CommandResult node(int node_rank, const std::string& endpoint, const std::string& kill,
                            const std::filesystem::path& dump) {
  return testing::run_command(
      "OMP_NUM_THREADS=1 NGPU=1 NNODES=2 MAX_RESTARTS=2 NODE_RANK=" + std::to_string(node_rank) +
      " RDZV_ENDPOINT=" + endpoint + " TITAN_TEST_KILL_AT=" + kill + " " +
      testing::titan_binary() + " launch " + kArgs + " --training.dataset_path " +
      testing::shakespeare() + " --metrics.log_freq 1 --job.dump_folder " + dump.string());
}

TEST_F(LauncherRestart, TwoNodesRestartTogetherWhicheverNodeLostARank) {
  for (const std::string kill : {"1:7", "0:12"}) {
    testing::TrainRun run;
    run.dump = testing::make_temp_dir("titan_restart_2node");
    const std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
    auto second = std::async(std::launch::async, node, 1, endpoint, kill, run.dump);
    run.command = node(0, endpoint, kill, run.dump);
    const auto other = second.get();
    std::ifstream in(run.dump / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) run.records.push_back(nlohmann::json::parse(line));
    expect_restarted_like(whole(), run, "two nodes, killed at " + kill);
    ASSERT_EQ(other.exit_code, 0) << other.output;
    // Both launchers name the rank that died, and the one whose rank lived stopped its own.
    const auto& survivor = kill[0] == '0' ? other.output : run.command.output;
    EXPECT_NE(survivor.find("rank " + kill.substr(0, 1) + " (node " + kill.substr(0, 1) +
                            ") failed with signal 9"),
              std::string::npos)
        << survivor;
    EXPECT_NE(other.output.find("titan launch: restart 1 of 2"), std::string::npos) << other.output;
  }
}

TEST(LauncherGivingUp, WithoutRestartsTheLauncherGivesUpNamingTheSignal) {
  auto run = testing::train("OMP_NUM_THREADS=1 NGPU=2 TITAN_TEST_KILL_AT=1:3", kArgs);
  EXPECT_NE(run.command.exit_code, 0);
  EXPECT_NE(run.command.output.find("rank 1 ended by signal 9"), std::string::npos)
      << run.command.output;
  EXPECT_EQ(run.command.output.find("restart 1"), std::string::npos);
}

}  // namespace integration_restart_test
}  // namespace titan
