#include "titan/distributed/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "titan/distributed/flight_recorder.h"
#include "titan/distributed/node_rendezvous.h"
#include "titan/distributed/process_group.h"
#include "titan/errors.h"
#include "titan/platform/cpu_threads.h"
#include "titan/platform/device.h"
#include "titan/platform/env.h"
#include "titan/platform/logging.h"

namespace titan::distributed {
namespace {

using platform::env_int;

volatile std::sig_atomic_t g_stop_signal = 0;

void on_signal(int sig) { g_stop_signal = sig; }

// The last `n` lines of the latest run in the rank log at `path` (platform/logging.h).
std::string tail_lines(const std::string& path, size_t n) {
  std::ifstream file(path);
  std::istringstream in(log::latest_run(std::string(std::istreambuf_iterator<char>(file), {})));
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

// LOG_RANK as given, when it is "all" or ranks of the world separated by commas.
std::string checked_log_rank(const std::string& spec, const LaunchOptions& o) {
  if (spec == "all") return spec;
  std::stringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    const long rank = digits ? std::strtol(item.c_str(), nullptr, 10) : -1;
    if (rank < 0) {
      throw ConfigError(fmt::format("LOG_RANK='{}' must be all or ranks separated by commas "
                                    "(e.g. 0 or 0,3)",
                                    spec));
    }
    if (rank >= o.world_size()) {
      throw ConfigError(fmt::format("LOG_RANK='{}' names rank {}, but the world has {} ranks "
                                    "(NGPU={} x NNODES={}): no console output would appear",
                                    spec, rank, o.world_size(), o.nproc_per_node, o.nnodes));
    }
  }
  return spec;
}

// A worker's environment: the launcher's with torchrun's variables set.
std::vector<std::string> worker_environment(const LaunchOptions& o, int local_rank,
                                            int master_port, int restart, bool agent_store) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + local_rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["GROUP_RANK"] = std::to_string(o.node_rank);
  env["WORLD_SIZE"] = std::to_string(o.world_size());
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = std::to_string(master_port);
  env["LOG_RANK"] = o.log_rank;
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restart);
  if (agent_store) {
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  } else {
    env.erase("TORCHELASTIC_USE_AGENT_STORE");  // rank 0 hosts the store, even under torchrun
  }
  env.try_emplace("OMP_NUM_THREADS",
                  std::to_string(platform::configured_threads(o.nproc_per_node)));
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

// Everything the child needs is built before fork: the launcher may run threads (node 0's
// store), so the child only execs.
pid_t spawn_worker(const LaunchOptions& o, int local_rank, int master_port, int restart,
                   bool agent_store) {
  std::vector<std::string> env_s =
      worker_environment(o, local_rank, master_port, restart, agent_store);
  std::vector<std::string> argv_s = {"titan"};
  argv_s.insert(argv_s.end(), o.worker_args.begin(), o.worker_args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Error("fork failed while starting workers");
  if (pid > 0) return pid;
  // Child: die with the launcher; keep none of its descriptors (the store's sockets); become
  // the worker.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execve("/proc/self/exe", argv.data(), envp.data());
  const char failed[] = "titan launch: exec of the worker failed\n";
  [[maybe_unused]] auto ignored = write(STDERR_FILENO, failed, sizeof(failed) - 1);
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

// What this node's launcher says of a failure another node posted (rank -1: that node's
// launcher itself stopped: a signal, or a refusal at start).
void report_remote(const RoundFailure& f, int nproc_per_node) {
  if (f.store_lost) return;
  if (f.rank < 0) {
    std::cerr << fmt::format("titan launch: another node's launcher stopped ({}{}); so does this "
                             "node's\n",
                             describe_exit(f.code),
                             f.code == kConfigErrorExitCode ? ": a config error its output names"
                                                            : "");
    return;
  }
  std::cerr << fmt::format("titan launch: rank {} (node {}) failed with {}; stopped this node's "
                           "workers\n",
                           f.rank, f.rank / nproc_per_node, describe_exit(f.code));
}

// The round's failure posted by another node, if any. Losing node 0's store ends the run.
std::optional<RoundFailure> remote_failure(NodeRendezvous& nodes, int round) {
  try {
    return nodes.failure(round);
  } catch (const std::exception& e) {
    std::cerr << fmt::format("titan launch: lost the launchers' rendezvous store (node 0's "
                             "launcher gone?): {}\n",
                             message_of(e));
    return RoundFailure{-1, 1, /*final=*/true, /*store_lost=*/true};
  }
}

// Posts this node's failure to the other nodes; the one that stands (the first posted) is
// what every node acts on. A rank that only lost a peer (exit code 3) waits a moment for the
// node whose rank failed on its own, which posts as soon as it sees it, to post first.
RoundFailure agree_failure(NodeRendezvous* nodes, int round, const RoundFailure& local) {
  if (!nodes) return local;
  if (local.code == kPeerFailedExitCode) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      if (auto remote = remote_failure(*nodes, round)) return *remote;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  try {
    return nodes->post_failure(round, local);
  } catch (const std::exception&) {
    return {local.rank, local.code, /*final=*/true};
  }
}

// Waits until `done` or the launcher is signalled (false), up to `timeout` (throws CommError
// naming `what`). Store errors propagate.
bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout,
              const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (g_stop_signal) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      throw CommError(fmt::format("titan launch: {} within comm.init_timeout_seconds = {}", what,
                                  timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// Where the workers meet: on one node with RDZV_ENDPOINT, the store rank 0 hosts at its port;
// on several, the launchers' store on node 0; else a store this launcher hosts on a port the
// system picks as it binds it (torchrun --standalone's agent store). A port chosen first and bound
// later by rank 0 could be taken in between by any other socket on the machine.
struct WorkerStore {
  int port = 0;
  bool agent = false;  // the workers connect; none of them hosts it
  c10::intrusive_ptr<c10d::TCPStore> hosted;
};

WorkerStore worker_store(const LaunchOptions& o, bool several_nodes) {
  if (o.master_port != 0) return {o.master_port, several_nodes, {}};
  c10d::TCPStoreOptions opts;
  opts.port = 0;
  opts.isServer = true;
  opts.waitWorkers = false;
  try {
    auto hosted = c10::make_intrusive<c10d::TCPStore>(o.master_addr, opts);
    return {static_cast<int>(hosted->getPort()), true, hosted};
  } catch (const std::exception& e) {
    throw CommError(fmt::format("titan launch: cannot host the workers' store on {}: {}",
                                o.master_addr, e.what()));
  }
}

// One start of the workers (the restart-th): a failure after stopping the others and printing
// why, or rank -1 and code 0 when all succeed. With `nodes`, a failure on any node stops this
// node's workers too, and node 0 waits for every node's workers to succeed.
RoundFailure run_workers(const LaunchOptions& o, int restart, NodeRendezvous* nodes,
                         const WorkerStore& store) {
  const auto started = std::filesystem::file_time_type::clock::now();  // newer traces are ours
  std::vector<pid_t> pids;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    pids.push_back(spawn_worker(o, local, store.port, restart, store.agent));
  }
  const int first_rank = o.node_rank * o.nproc_per_node;
  int running = o.nproc_per_node;
  auto next_poll = std::chrono::steady_clock::now();
  while (running > 0) {
    if (g_stop_signal) {
      std::cerr << fmt::format("titan launch: received signal {}, stopping workers\n",
                               static_cast<int>(g_stop_signal));
      stop_all(pids);
      return agree_failure(nodes, restart, {-1, 128 + g_stop_signal, /*final=*/true});
    }
    if (nodes && std::chrono::steady_clock::now() >= next_poll) {
      next_poll = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
      if (auto remote = remote_failure(*nodes, restart)) {
        if (!o.comm_traces_folder.empty()) {
          collect_comm_traces(pids, first_rank, o.comm_traces_folder);
        }
        stop_all(pids);
        report_remote(*remote, o.nproc_per_node);
        return *remote;
      }
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
    // A rank that failed on its own (not one that only lost a peer, exit code 3) is posted to
    // the other nodes at once, before the grace period, the traces and stopping the workers,
    // so that it stands rather than their ranks' lost peers.
    std::optional<RoundFailure> posted;
    const auto post_own = [&](int local, int local_code) {
      if (nodes && !posted && local_code != kPeerFailedExitCode) {
        posted = agree_failure(nodes, restart, {first_rank + local, local_code});
      }
    };
    post_own(static_cast<int>(it - pids.begin()), code);
    // Ranks that lost a peer fail too: wait a moment, then blame a rank that failed on its own
    // if there is one.
    std::vector<std::pair<int, int>> failed = {{static_cast<int>(it - pids.begin()), code}};
    auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < grace) {
      pid_t more = waitpid(-1, &status, WNOHANG);
      auto m = std::find(pids.begin(), pids.end(), more);
      if (more > 0 && m != pids.end()) {
        *m = -1;
        if (exit_code_of(status) != 0) {
          failed.emplace_back(static_cast<int>(m - pids.begin()), exit_code_of(status));
          post_own(failed.back().first, failed.back().second);
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    auto primary = std::find_if(failed.begin(), failed.end(),
                                [](const auto& f) { return f.second != kPeerFailedExitCode; });
    if (primary == failed.end()) primary = failed.begin();
    if (!o.comm_traces_folder.empty()) collect_comm_traces(pids, first_rank, o.comm_traces_folder);
    stop_all(pids);
    int local = primary->first;
    int rank = first_rank + local;
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
    const RoundFailure agreed =
        posted ? *posted : agree_failure(nodes, restart, {rank, primary->second});
    if (agreed.rank != rank) report_remote(agreed, o.nproc_per_node);
    if (nodes && agreed.rank == rank && agreed.code == kPeerFailedExitCode) {
      std::cerr << fmt::format("titan launch: rank {} only lost a peer, and no node reported a "
                               "rank that failed on its own: another node's launcher may be "
                               "gone (a restart waits comm.init_timeout_seconds for it; one "
                               "started again with its NODE_RANK rejoins)\n",
                               rank);
    }
    return agreed;
  }
  if (nodes) {
    // The round succeeds when every node's workers do: a failure elsewhere after this node's
    // finished is this node's too, so that all restart or give up together.
    nodes->finish(restart);
    std::optional<RoundFailure> late;
    const bool done = wait_for(
        [&] { return nodes->all_finished(restart) || (late = remote_failure(*nodes, restart)); },
        nodes->timeout(), "not every node's workers finished");
    if (!done) return agree_failure(nodes, restart, {-1, 128 + g_stop_signal, /*final=*/true});
    if (late) {
      report_remote(*late, o.nproc_per_node);
      return *late;
    }
  }
  return {};
}

// Every node's launcher arrives before the restart-th start (so that no worker of the last
// start is still running anywhere): no failure, or the one that ended the meeting (another
// node's launcher stopped, or this one was signalled).
RoundFailure meet_nodes(NodeRendezvous& nodes, int restart, int nproc_per_node) {
  nodes.arrive(restart);
  std::optional<RoundFailure> posted;
  const auto said_at = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  bool said = false;
  const bool met = wait_for(
      [&] {
        if (!said && std::chrono::steady_clock::now() > said_at) {
          said = true;
          std::cerr << fmt::format("titan launch: waiting up to comm.init_timeout_seconds = {} "
                                   "for every node's launcher (NNODES={}) to arrive for start {} "
                                   "of the workers\n",
                                   nodes.timeout().count(), nodes.nnodes(), restart);
        }
        return nodes.all_arrived(restart) || (posted = remote_failure(nodes, restart));
      },
      nodes.timeout(),
      fmt::format("not every node's launcher (NNODES={}) arrived for start {} of the workers",
                  nodes.nnodes(), restart));
  if (!met) {
    std::cerr << fmt::format("titan launch: received signal {} while waiting for the other "
                             "nodes\n",
                             static_cast<int>(g_stop_signal));
    return agree_failure(&nodes, restart, {-1, 128 + g_stop_signal, /*final=*/true});
  }
  if (posted) {
    report_remote(*posted, nproc_per_node);
    return *posted;
  }
  return {};
}

// Every node has read how the round ended before node 0's launcher, which hosts the store,
// exits (up to 10 s, signalled or not: a node that went away does not hold it).
void end_round(NodeRendezvous& nodes, int round, bool store_closes) {
  try {
    nodes.acknowledge(round);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (store_closes && !nodes.all_acknowledged(round) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
    // The store is gone: nothing more to tell the other nodes.
  }
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
  if (const char* lr = std::getenv("LOG_RANK"); lr && *lr) o.log_rank = checked_log_rank(lr, o);
  o.max_restarts = env_int("MAX_RESTARTS", 0);
  if (const char* mode = std::getenv("COMM_MODE"); mode && *mode) {
    if (std::string(mode) != "fake_backend") {
      throw ConfigError(fmt::format("COMM_MODE='{}' is not a mode titan has: fake_backend (a dry "
                                    "run of the config for the world size, in one process), or "
                                    "unset to train",
                                    mode));
    }
    o.comm_mode = mode;
  }
  return o;
}

int launch(const LaunchOptions& o) {
  std::unique_ptr<NodeRendezvous> nodes;
  if (o.nnodes > 1) {
    // Connecting may wait for node 0 up to comm.init_timeout_seconds; Ctrl-C ends it at once
    // (the handlers below are not installed yet, and no worker runs).
    nodes = std::make_unique<NodeRendezvous>(o.master_addr, o.master_port, o.node_rank, o.nnodes,
                                             o.init_timeout);
    try {
      nodes->expect_same("NNODES", std::to_string(o.nnodes));
      nodes->expect_same("NGPU", std::to_string(o.nproc_per_node));
      nodes->expect_same("MAX_RESTARTS", std::to_string(o.max_restarts));
    } catch (const ConfigError&) {
      agree_failure(nodes.get(), 0, {-1, kConfigErrorExitCode, /*final=*/true});
      end_round(*nodes, 0, /*store_closes=*/o.node_rank == 0);
      throw;
    }
  }
  const WorkerStore store = worker_store(o, nodes != nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (int restart = 0;; ++restart) {
    RoundFailure failure;
    if (nodes) failure = meet_nodes(*nodes, restart, o.nproc_per_node);
    if (failure.code == 0) failure = run_workers(o, restart, nodes.get(), store);
    if (failure.code != 0 && g_stop_signal) failure = {failure.rank, 128 + g_stop_signal, true};
    const bool again = failure.code != 0 && !failure.final &&
                       failure.code != kConfigErrorExitCode &&
                       failure.code != kDivergedExitCode && restart < o.max_restarts;
    if (nodes) end_round(*nodes, restart, /*store_closes=*/!again && o.node_rank == 0);
    if (failure.code == 0) return 0;
    if (!again) {
      if (restart == o.max_restarts && restart > 0) {
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
