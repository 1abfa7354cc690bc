// The per-node launcher behind run_train.sh (torchrun's job, which Debian's torchrun cannot do):
// starts one worker process per local rank with torchrun's environment variables, keeps it
// fail-fast, forwards Ctrl-C / SIGTERM, and reports the failing rank.
#pragma once

#include <string>
#include <vector>

namespace titan::distributed {

/// Exit code of a worker that stopped because a collective failed (a peer died or a timeout):
/// a consequence of another rank's failure, which the launcher reports instead when it can.
constexpr int kPeerFailedExitCode = 3;

struct LaunchOptions {
  int nproc_per_node = 2;  // NGPU
  int nnodes = 1;          // NNODES
  int node_rank = 0;       // NODE_RANK / OMPI_COMM_WORLD_RANK / SLURM_NODEID
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // from RDZV_ENDPOINT; 0 = pick a free local port
  std::string log_rank = "0";     // LOG_RANK: "0", "0,3" or "all"
  std::string dump_folder;        // where logs/rank_<r>.log are written
  std::string comm_traces_folder;  // the flight recorder's (empty: none)
  std::vector<std::string> worker_args;  // argv of each worker after the program name

  int world_size() const { return nproc_per_node * nnodes; }

  /// From NGPU, NNODES, NODE_RANK (or OMPI_COMM_WORLD_RANK, SLURM_NODEID), RDZV_ENDPOINT,
  /// LOG_RANK. Throws ConfigError naming the variable for a malformed or missing value
  /// (RDZV_ENDPOINT is required when NNODES > 1).
  static LaunchOptions from_env();
};

/// Starts the workers (`/proc/self/exe` with `worker_args`) and waits. When one exits non-zero
/// the others are asked for their flight recorder's traces (SIGUSR1, when comm_traces_folder
/// is set), get SIGTERM (then SIGKILL after 5 s), the failing rank's last log lines and what
/// the traces say (explain_comm_traces) are printed, and its exit code is returned;
/// SIGINT/SIGTERM to the launcher reach every worker.
/// Returns 0 when all workers succeed.
int launch(const LaunchOptions& options);

}  // namespace titan::distributed
