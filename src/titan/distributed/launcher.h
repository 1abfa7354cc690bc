// The per-node launcher behind run_train.sh (torchrun's job, which Debian's torchrun cannot do):
// starts one worker process per local rank with torchrun's environment variables, keeps it
// fail-fast, forwards Ctrl-C / SIGTERM, and reports the failing rank.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace titan::distributed {

/// Exit code of a worker that stopped because a collective failed (a peer died or a timeout):
/// a consequence of another rank's failure, which the launcher reports instead when it can.
constexpr int kPeerFailedExitCode = 3;
/// Exit code of a worker (or command) stopped by a ConfigError: restarting cannot help.
constexpr int kConfigErrorExitCode = 2;
/// Exit code of a worker stopped by a non-finite step (DivergedError): nor can it there.
constexpr int kDivergedExitCode = 4;

struct LaunchOptions {
  int nproc_per_node = 2;  // NGPU
  int nnodes = 1;          // NNODES
  int node_rank = 0;       // NODE_RANK / OMPI_COMM_WORLD_RANK / SLURM_NODEID
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // from RDZV_ENDPOINT; 0 = a port the launcher picks and holds
  std::string log_rank = "0";     // LOG_RANK: "0", "0,3" or "all"
  std::string comm_mode;          // COMM_MODE: empty, or "fake_backend" (a dry run)
  std::string dump_folder;        // where logs/rank_<r>.log are written
  std::string comm_traces_folder;  // the flight recorder's (empty: none)
  int max_restarts = 0;            // MAX_RESTARTS (torchrun's --max_restarts)
  std::chrono::seconds init_timeout{300};  // comm.init_timeout_seconds: the nodes' rendezvous
  std::vector<std::string> worker_args;  // argv of each worker after the program name

  int world_size() const { return nproc_per_node * nnodes; }

  /// From NGPU, NNODES, NODE_RANK (or OMPI_COMM_WORLD_RANK, SLURM_NODEID), RDZV_ENDPOINT,
  /// LOG_RANK, MAX_RESTARTS, COMM_MODE. Throws ConfigError naming the variable for a malformed,
  /// out-of-range (a LOG_RANK rank outside the world) or unknown value, or a missing one
  /// (RDZV_ENDPOINT is required when NNODES > 1).
  static LaunchOptions from_env();
};

/// Starts the workers (`/proc/self/exe` with `worker_args`) and waits. When one exits non-zero
/// the others are asked for their flight recorder's traces (SIGUSR1, when comm_traces_folder
/// is set), get SIGTERM (then SIGKILL after 5 s), and the failing rank's last log lines and what
/// the traces say (explain_comm_traces) are printed. Then, up to max_restarts times, every
/// worker is started again (torchrun's TORCHELASTIC_RESTART_COUNT tells them which start this
/// is; a trainer with checkpoint.enable resumes from the latest complete checkpoint), unless
/// the failure was a config error (exit code 2), a non-finite step (4) or a signal to the
/// launcher; otherwise the failing rank's exit code is returned. With NNODES > 1 the nodes'
/// launchers meet before every start through the store at RDZV_ENDPOINT (NodeRendezvous,
/// hosted by node 0's launcher, which the workers use too): a failure on any node stops every
/// node's workers, and all restart or give up together. SIGINT/SIGTERM to the launcher reach
/// every worker. Returns 0 when all workers succeed.
int launch(const LaunchOptions& options);

}  // namespace titan::distributed
