#include "titan/distributed/launcher.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "titan/distributed/flight_recorder.h"
#include "titan/errors.h"
#include "titan/platform/cpu_threads.h"
#include "titan/platform/device.h"
#include "titan/platform/env.h"

namespace titan::distributed {
namespace {

using platform::env_int;

volatile std::sig_atomic_t g_stop_signal = 0;

void on_signal(int sig) { g_stop_signal = sig; }

int free_local_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    throw CommError("cannot find a free local port for the rendezvous store");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string tail_lines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += "  | " + l + "\n";
  return out;
}

pid_t spawn_worker(const LaunchOptions& o, int local_rank, int master_port, int restart) {
  int rank = o.node_rank * o.nproc_per_node + local_rank;
  int threads = platform::configured_threads(o.nproc_per_node);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Error("fork failed while starting workers");
  if (pid > 0) return pid;
  // Child: die with the launcher; get torchrun's variables; become the worker.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  setenv("GROUP_RANK", std::to_string(o.node_rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(o.world_size()).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
  setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(master_port).c_str(), 1);
  setenv("LOG_RANK", o.log_rank.c_str(), 1);
  setenv("TORCHELASTIC_RESTART_COUNT", std::to_string(restart).c_str(), 1);
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 0);
  std::vector<std::string> argv_s = {"titan"};
  argv_s.insert(argv_s.end(), o.worker_args.begin(), o.worker_args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::perror("titan launch: exec failed");
  _exit(127);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// "exit code 1", or "signal 9 (Killed)" for a worker a signal ended.
std::string describe_exit(int code) {
  if (code <= 128) return fmt::format("exit code {}", code);
  return fmt::format("signal {} ({})", code - 128, strsignal(code - 128));
}

// A failed start of the workers: the rank shown and its exit code.
struct Failure {
  int rank = -1;
  int code = 0;
};

// The flight recorder: asks the workers still running (global ranks first_rank + index) to
// dump their comm traces into `folder` (SIGUSR1), and waits up to 5 s for the files.
void collect_comm_traces(const std::vector<pid_t>& pids, int first_rank,
                         const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  // File times tick coarsely: a dump just after the signal may read as a little older.
  const auto asked = fs::file_time_type::clock::now() - std::chrono::seconds(1);
  std::vector<fs::path> expected;
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0) continue;
    kill(pids[i], SIGUSR1);
    expected.push_back(folder / fmt::format("rank_{}.json", first_rank + static_cast<int>(i)));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto written = [&](const fs::path& p) {
    std::error_code ec;
    return fs::exists(p, ec) && fs::last_write_time(p, ec) >= asked;
  };
  while (std::chrono::steady_clock::now() < deadline &&
         !std::all_of(expected.begin(), expected.end(), written)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void stop_all(std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    if (p > 0) kill(p, SIGTERM);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (pid_t& p : pids) {
    while (p > 0) {
      int status = 0;
      if (waitpid(p, &status, WNOHANG) == p) {
        p = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(p, SIGKILL);
        waitpid(p, &status, 0);
        p = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
}

// One start of the workers (the restart-th): a failure after stopping the others and printing
// why, or rank -1 when all succeed.
Failure run_workers(const LaunchOptions& o, int restart) {
  const auto started = std::filesystem::file_time_type::clock::now();  // newer traces are ours
  int port = o.master_port ? o.master_port : free_local_port();
  std::vector<pid_t> pids;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    pids.push_back(spawn_worker(o, local, port, restart));
  }

  int running = o.nproc_per_node;
  while (running > 0) {
    if (g_stop_signal) {
      std::cerr << fmt::format("titan launch: received signal {}, stopping workers\n",
                               static_cast<int>(g_stop_signal));
      stop_all(pids);
      return {-1, 128 + g_stop_signal};
    }
    int status = 0;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto it = std::find(pids.begin(), pids.end(), done);
    if (it == pids.end()) continue;
    *it = -1;
    --running;
    int code = exit_code_of(status);
    if (code == 0) continue;
    // Ranks that lost a peer fail too (exit code 3): wait a moment, then blame a rank that
    // failed on its own if there is one.
    std::vector<std::pair<int, int>> failed = {{static_cast<int>(it - pids.begin()), code}};
    auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < grace) {
      pid_t more = waitpid(-1, &status, WNOHANG);
      auto m = std::find(pids.begin(), pids.end(), more);
      if (more > 0 && m != pids.end()) {
        *m = -1;
        if (exit_code_of(status) != 0) {
          failed.emplace_back(static_cast<int>(m - pids.begin()), exit_code_of(status));
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    auto primary = std::find_if(failed.begin(), failed.end(),
                                [](const auto& f) { return f.second != kPeerFailedExitCode; });
    if (primary == failed.end()) primary = failed.begin();
    const int first_rank = o.node_rank * o.nproc_per_node;
    if (!o.comm_traces_folder.empty()) collect_comm_traces(pids, first_rank, o.comm_traces_folder);
    stop_all(pids);
    int local = primary->first;
    int rank = o.node_rank * o.nproc_per_node + local;
    std::string log = fmt::format("{}/logs/rank_{}.log", o.dump_folder, rank);
    std::cerr << fmt::format("titan launch: rank {} (local rank {}) exited with code {}; "
                             "stopped the other workers. Last lines of {}:\n{}",
                             rank, local, primary->second, log, tail_lines(log, 20));
    if (primary->second > 128) {
      std::cerr << fmt::format("titan launch: rank {} ended by {}\n", rank,
                               describe_exit(primary->second));
    }
    if (!o.comm_traces_folder.empty()) {
      const auto lines = explain_comm_traces(o.comm_traces_folder, started);
      if (!lines.empty()) {
        std::cerr << fmt::format("titan launch: the flight recorder's traces in {}:\n",
                                 o.comm_traces_folder);
        for (const auto& line : lines) std::cerr << "  " << line << "\n";
      }
    }
    return {rank, primary->second};
  }
  return {};
}

}  // namespace

LaunchOptions LaunchOptions::from_env() {
  LaunchOptions o;
  // As TorchTitan's run_train.sh: one rank per visible GPU; two CPU ranks on a machine without.
  const int gpus = platform::visible_gpus();
  o.nproc_per_node = env_int("NGPU", gpus > 0 ? gpus : 2, 1);
  o.nnodes = env_int("NNODES", 1, 1);
  int scheduler_node = env_int("OMPI_COMM_WORLD_RANK", env_int("SLURM_NODEID", 0));
  o.node_rank = env_int("NODE_RANK", scheduler_node);
  if (o.node_rank >= o.nnodes) {
    throw ConfigError(fmt::format("NODE_RANK={} must be below NNODES={}", o.node_rank, o.nnodes));
  }
  const char* rdzv = std::getenv("RDZV_ENDPOINT");
  if (rdzv && *rdzv) {
    std::string endpoint = rdzv;
    auto colon = endpoint.rfind(':');
    if (colon == std::string::npos) {
      throw ConfigError(fmt::format("RDZV_ENDPOINT='{}' must be host:port", endpoint));
    }
    o.master_addr = endpoint.substr(0, colon);
    char* end = nullptr;
    long port = std::strtol(endpoint.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) {
      throw ConfigError(fmt::format("RDZV_ENDPOINT='{}' has no valid port", endpoint));
    }
    o.master_port = static_cast<int>(port);
  } else if (o.nnodes > 1) {
    throw ConfigError("RDZV_ENDPOINT=host:port is required when NNODES > 1 (every node must "
                      "reach the same rendezvous store)");
  }
  if (const char* lr = std::getenv("LOG_RANK")) o.log_rank = lr;
  o.max_restarts = env_int("MAX_RESTARTS", 0);
  if (o.max_restarts > 0 && o.nnodes > 1) {
    throw ConfigError(fmt::format("MAX_RESTARTS={} with NNODES={}: restarting every node's "
                                  "workers together is not built yet (single-node runs only)",
                                  o.max_restarts, o.nnodes));
  }
  return o;
}

int launch(const LaunchOptions& o) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (int restart = 0;; ++restart) {
    const Failure failure = run_workers(o, restart);
    if (failure.code == 0) return 0;
    if (g_stop_signal || failure.code == kConfigErrorExitCode ||
        failure.code == kDivergedExitCode) {
      return failure.code;
    }
    if (restart == o.max_restarts) {
      if (restart > 0) {
        std::cerr << fmt::format("titan launch: giving up after {} restart(s) (MAX_RESTARTS={}); "
                                 "the last failure is above\n",
                                 restart, o.max_restarts);
      }
      return failure.code;
    }
    std::cerr << fmt::format("titan launch: restart {} of {} (MAX_RESTARTS): rank {} failed with "
                             "{}; starting every worker again (with checkpoint.enable they "
                             "resume from the latest complete checkpoint)\n",
                             restart + 1, o.max_restarts, failure.rank,
                             describe_exit(failure.code));
  }
}

}  // namespace titan::distributed
