// The launcher through the real binary: torchrun-style worlds on loopback (1 node x 2 ranks,
// 2 "nodes" x 2 ranks from two launchers, node ranks from NODE_RANK, Open MPI or Slurm), LOG_RANK,
// fail-fast, signals reaching every worker, and the fake-backend dry run.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

#include "support/process.h"
#include "support/training.h"

namespace titan {
namespace integration_launcher_test {

using testing::run_command;
using testing::titan_binary;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Launcher, OneNodeTwoRanksAllReduce) {
  auto dir = testing::make_temp_dir("titan_launch");
  auto r = run_command("NGPU=2 " + titan_binary() +
                       " launch --worker comm-check --job.dump_folder " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_reduce sum 3 (expected 3), all_gather ok"), std::string::npos)
      << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "logs" / "rank_1.log"));
}

// A training dataset that cannot be read stops the launch before any worker starts (each worker
// found it alone before, after the launch had begun).
TEST(Launcher, MissingDatasetStopsBeforeAnyWorker) {
  auto dir = testing::make_temp_dir("titan_launch");
  auto r = run_command("NGPU=2 " + titan_binary() +
                       " launch --training.dataset_path /nonexistent/titan/data.jsonl "
                       "--job.dump_folder " +
                       (dir / "run").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("training.dataset_path /nonexistent/titan/data.jsonl"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "logs")) << r.output;
}

TEST(Launcher, TwoNodesOfTwoRanksOnLoopback) {
  auto dir = testing::make_temp_dir("titan_2node");
  std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
  auto node = [&](int node_rank) {
    return run_command("NGPU=2 NNODES=2 NODE_RANK=" + std::to_string(node_rank) +
                       " RDZV_ENDPOINT=" + endpoint + " " + titan_binary() +
                       " launch --worker comm-check --job.dump_folder " + dir.string());
  };
  auto second = std::async(std::launch::async, node, 1);
  auto first = node(0);
  auto other = second.get();
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(first.output.find("world 4 (local 2), all_reduce sum 10 (expected 10)"),
            std::string::npos)
      << first.output;
  for (int r = 0; r < 4; ++r) {
    auto log = read_file(dir / "logs" / ("rank_" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("all_reduce sum 10"), std::string::npos) << "rank " << r << ": " << log;
  }
}

// LOG_RANK picks the ranks echoed to the console, each line prefixed with its rank; every rank
// writes its own log file whatever LOG_RANK says.
TEST(Launcher, LogRankSelectsTheRanksOnTheConsole) {
  struct Case {
    std::string spec;
    std::vector<int> shown;
  };
  for (const auto& c :
       {Case{"", {0}}, Case{"1", {1}}, Case{"0,2", {0, 2}}, Case{"all", {0, 1, 2}}}) {
    auto dir = testing::make_temp_dir("titan_logrank");
    auto r = run_command((c.spec.empty() ? "" : "LOG_RANK=" + c.spec + " ") + "NGPU=3 " +
                         titan_binary() + " launch --worker comm-check --job.dump_folder " +
                         dir.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (int rank = 0; rank < 3; ++rank) {
      const bool shown = std::find(c.shown.begin(), c.shown.end(), rank) != c.shown.end();
      const std::string prefix = "[rank" + std::to_string(rank) + "]:[titan]";
      EXPECT_EQ(r.output.find(prefix) != std::string::npos, shown)
          << "LOG_RANK=" << c.spec << " rank " << rank << "\n" << r.output;
      EXPECT_NE(read_file(dir / "logs" / ("rank_" + std::to_string(rank) + ".log"))
                    .find("comm check: world 3"),
                std::string::npos);
    }
  }
}

// Without NODE_RANK, a node's rank comes from Open MPI's OMPI_COMM_WORLD_RANK or Slurm's
// SLURM_NODEID (one launcher per node, as mpirun or srun start them).
TEST(Launcher, NodeRankFromOpenMpiOrSlurm) {
  auto dir = testing::make_temp_dir("titan_noderank");
  std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
  auto node = [&](const std::string& rank_env) {
    return run_command("NGPU=2 NNODES=2 " + rank_env + " RDZV_ENDPOINT=" + endpoint + " " +
                       titan_binary() + " launch --worker comm-check --job.dump_folder " +
                       dir.string());
  };
  auto second = std::async(std::launch::async, node, "OMPI_COMM_WORLD_RANK=1");
  auto first = node("SLURM_NODEID=0");
  auto other = second.get();
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(first.output.find("world 4 (local 2), all_reduce sum 10"), std::string::npos)
      << first.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "logs" / "rank_3.log"));
}

TEST(Launcher, FailFastStopsTheOtherRanks) {
  auto dir = testing::make_temp_dir("titan_failfast");
  auto start = std::chrono::steady_clock::now();
  // Rank 1 exits 1; ranks 0 and 2 would wait in the all-reduce for 100 s.
  auto r = run_command("TITAN_COMM_CHECK_FAIL_RANK=1 NGPU=3 " + titan_binary() +
                       " launch --worker comm-check --comm.train_timeout_seconds 100 "
                       "--job.dump_folder " + dir.string());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  // Stopped by the launcher, not by the others' 100 s collective timeout (a margin for a loaded
  // machine: this bounds the wait, not the speed).
  EXPECT_LT(seconds, 90.0) << r.output;
  EXPECT_NE(r.output.find("rank 1 (local rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failing on purpose"), std::string::npos) << r.output;
}

// SIGTERM and Ctrl-C (SIGINT; a terminal sends it to the workers as well, here only the
// launcher gets it) stop every training worker, and the launcher exits with 128 + the signal;
// a launcher killed outright takes its workers with it (they die with their parent).
class LauncherSignal : public ::testing::TestWithParam<int> {};

TEST_P(LauncherSignal, StopsEveryWorker) {
  const int sig = GetParam();
  auto dir = testing::make_temp_dir("titan_signal");
  const pid_t launcher = testing::spawn_command(
      "env NGPU=2 " + titan_binary() + " launch --module llama3 --config llama3_debugmodel " +
          "--training.steps 100000 --training.seq_len 64 --training.local_batch_size 1 " +
          "--metrics.log_freq 1 --training.dataset_path " + testing::shakespeare() +
          " --job.dump_folder " + dir.string(),
      dir / "launcher.log");
  // Both workers are in the training loop once rank 0 logged a step (it waited for rank 1's
  // gradients).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (read_file(dir / "metrics.jsonl").empty() && testing::process_alive(launcher) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto workers = testing::child_processes(launcher);
  ASSERT_EQ(workers.size(), 2u) << read_file(dir / "launcher.log");
  ASSERT_EQ(kill(launcher, sig), 0);
  EXPECT_EQ(testing::wait_for_exit(launcher, std::chrono::seconds(60)), 128 + sig)
      << read_file(dir / "launcher.log");
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (pid_t w : workers) {
    while (testing::process_alive(w) && std::chrono::steady_clock::now() < gone_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(testing::process_alive(w)) << "worker " << w << " outlived signal " << sig;
    if (testing::process_alive(w)) kill(w, SIGKILL);
  }
  if (sig != SIGKILL) {
    EXPECT_NE(read_file(dir / "launcher.log").find("received signal"), std::string::npos)
        << read_file(dir / "launcher.log");
  }
}

INSTANTIATE_TEST_SUITE_P(TermIntKill, LauncherSignal, ::testing::Values(SIGTERM, SIGINT, SIGKILL),
                         [](const auto& info) {
                           return info.param == SIGTERM ? "SIGTERM"
                                  : info.param == SIGINT ? "SIGINT"
                                                         : "SIGKILL";
                         });

// Issue 40: environment values are refused by name, before any worker starts, as NGPU's are:
// COMM_MODE=bogus had trained for real, LOG_RANK=5 on 2 ranks and LOG_RANK=abc had run with no
// console output at all.
TEST(Launcher, UnknownOrOutOfRangeEnvironmentValuesAreRefusedByName) {
  struct Case {
    std::string env;
    std::string message;
  };
  for (const auto& c : {Case{"COMM_MODE=bogus", "COMM_MODE='bogus' is not a mode titan has"},
                        Case{"LOG_RANK=5", "LOG_RANK='5' names rank 5, but the world has 2 ranks"},
                        Case{"LOG_RANK=0,2", "LOG_RANK='0,2' names rank 2"},
                        Case{"LOG_RANK=abc", "LOG_RANK='abc' must be all or ranks separated"},
                        Case{"LOG_RANK=0,,1", "LOG_RANK='0,,1' must be all"},
                        Case{"LOG_RANK=' 1'", "LOG_RANK=' 1' must be all"}}) {
    auto dir = testing::make_temp_dir("titan_badenv");
    auto r = run_command(c.env + " NGPU=2 " + titan_binary() +
                         " launch --worker comm-check --job.dump_folder " + dir.string());
    EXPECT_EQ(r.exit_code, 2) << c.env << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.env << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "logs")) << c.env << ": a worker started";
  }
}

// An empty LOG_RANK is LOG_RANK unset (it had silenced every rank); MODULE and CONFIG apply to
// titan launch as to run_train.sh (a CONFIG had been ignored there).
TEST(Launcher, EmptyLogRankIsTheDefaultAndModuleAndConfigApply) {
  auto dir = testing::make_temp_dir("titan_logrank_empty");
  auto r = run_command("LOG_RANK= NGPU=2 " + titan_binary() +
                       " launch --worker comm-check --job.dump_folder " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank0]:[titan]"), std::string::npos) << r.output;
  auto dry = run_command("COMM_MODE=fake_backend MODULE=qwen3 CONFIG=qwen3_moe_debugmodel NGPU=2 " +
                         titan_binary() + " launch");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("qwen3 debugmodel_moe"), std::string::npos) << dry.output;
}

// Issue 40: rank logs are appended across runs; each run starts with a header line, and the
// launcher's excerpt of a failed rank's log shows the current run only.
TEST(Launcher, EachRunStartsItsLogAndTheFailureExcerptIsTheCurrentRuns) {
  auto dir = testing::make_temp_dir("titan_logruns");
  const std::string launch =
      "NGPU=2 " + titan_binary() + " launch --worker comm-check --job.dump_folder " + dir.string();
  EXPECT_EQ(run_command(launch).exit_code, 0);
  const auto second = run_command("TITAN_COMM_CHECK_FAIL_RANK=1 " + launch);
  EXPECT_NE(second.exit_code, 0) << second.output;
  const std::string log = read_file(dir / "logs" / "rank_1.log");
  size_t headers = 0;
  for (size_t at = log.find("===== titan run started"); at != std::string::npos;
       at = log.find("===== titan run started", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 2u) << log;
  // The excerpt holds this run's failure and no line of the first run's.
  const size_t excerpt = second.output.find("Last lines of");
  ASSERT_NE(excerpt, std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("all_reduce sum", excerpt), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("failing on purpose", excerpt), std::string::npos)
      << second.output;
}

// Issue 40: asked for, the usage goes to stdout (it went to stderr); a mistake still gets it on
// stderr with exit code 2.
TEST(Launcher, TitanHelpGoesToStdout) {
  const auto help = run_command("(" + titan_binary() + " --help 2>/dev/null)");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("Usage: titan <command>"), std::string::npos) << help.output;
  const auto wrong = run_command("(" + titan_binary() + " bogus 2>/dev/null)");
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_EQ(wrong.output, "");
  EXPECT_EQ(run_command("(" + titan_binary() + " help 2>/dev/null)").output, help.output);
}

// Every utility command prints its usage to stdout for --help and for `titan help <command>`,
// and exits 0 without checking its other flags.
TEST(Launcher, EveryCommandHasHelp) {
  for (const std::string command :
       {"compare", "convert", "generate", "plan", "tokenize", "validate"}) {
    const auto help = run_command("(" + titan_binary() + " " + command + " --help 2>/dev/null)");
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.output.find("titan " + command), std::string::npos) << help.output;
    const auto asked = run_command("(" + titan_binary() + " help " + command + " 2>/dev/null)");
    EXPECT_EQ(asked.exit_code, 0) << command;
    EXPECT_EQ(asked.output, help.output) << command;
  }
}

// Issue 40: run_train.sh's setup says nothing when nothing is missing or changed (it had printed
// four lines before every run).
TEST(Launcher, RunTrainSetupIsSilentWhenNothingChanged) {
  auto r = run_command(std::string("bash -c 'source ") + TITAN_SOURCE_DIR +
                       "/scripts/setup.sh && titan_setup titan'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

TEST(Launcher, MissingRendezvousForTwoNodesIsAConfigError) {
  auto r = run_command("NGPU=1 NNODES=2 NODE_RANK=0 " + titan_binary() +
                       " launch --worker comm-check");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("RDZV_ENDPOINT"), std::string::npos) << r.output;
}

// Without restarts a failure on one node stops the other node's workers too, and both
// launchers exit with the failing rank's code, naming it (rank 2 is node 1's first).
TEST(Launcher, TwoNodesFailFastTogether) {
  auto dir = testing::make_temp_dir("titan_2node_failfast");
  const std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
  auto node = [&](int node_rank) {
    return run_command("TITAN_COMM_CHECK_FAIL_RANK=2 NGPU=2 NNODES=2 NODE_RANK=" +
                       std::to_string(node_rank) + " RDZV_ENDPOINT=" + endpoint + " " +
                       titan_binary() +
                       " launch --worker comm-check --comm.train_timeout_seconds 100 "
                       "--job.dump_folder " + dir.string());
  };
  const auto start = std::chrono::steady_clock::now();
  auto second = std::async(std::launch::async, node, 1);
  const auto first = node(0);
  const auto other = second.get();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_EQ(first.exit_code, 1) << first.output;
  EXPECT_NE(first.output.find("rank 2 (node 1) failed with exit code 1"), std::string::npos)
      << first.output;
  EXPECT_NE(other.output.find("failing on purpose"), std::string::npos) << other.output;
  EXPECT_LT(seconds, 90.0);  // stopped by the launchers, not the 100 s collective timeout
}

// Every node's launcher must agree on NGPU and MAX_RESTARTS (they restart together): the node
// that finds another value is refused, and the other stops too, both with a config error.
TEST(Launcher, NodesDisagreeingOnMaxRestartsAreRefused) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(testing::free_port());
  const auto launcher = [&](int node_rank, int restarts) {
    return run_command("NGPU=1 NNODES=2 NODE_RANK=" + std::to_string(node_rank) +
                       " MAX_RESTARTS=" + std::to_string(restarts) + " RDZV_ENDPOINT=" +
                       endpoint + " " + titan_binary() + " launch --worker comm-check");
  };
  auto second = std::async(std::launch::async, launcher, 1, 2);
  const auto first = launcher(0, 1);
  const auto other = second.get();
  EXPECT_EQ(first.exit_code, 2) << first.output;
  EXPECT_EQ(other.exit_code, 2) << other.output;
  const std::regex refusal("MAX_RESTARTS=[12] on node [01] but [12] on another node");
  EXPECT_TRUE(std::regex_search(first.output + other.output, refusal))
      << first.output << other.output;
}

TEST(Launcher, FakeBackendChecksALargeWorldInOneProcess) {
  auto r = run_command("COMM_MODE=fake_backend NGPU=8 NNODES=8 RDZV_ENDPOINT=127.0.0.1:1 " +
                       titan_binary() + " launch --module llama3 --config llama3_debugmodel");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dp_shard 64"), std::string::npos) << r.output;
}

}  // namespace integration_launcher_test
}  // namespace titan
