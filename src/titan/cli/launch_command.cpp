#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "titan/cli/commands.h"
#include "titan/cli/validated_baseline.h"
#include "titan/config/mesh_dims.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launcher.h"
#include "titan/train/dry_run.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

constexpr const char* kLaunchUsage =
    "Usage: [ENV...] ./run_train.sh [--section.key value]...\n"
    "       [ENV...] titan launch [--worker train|comm-check] [--module M] [--config C] "
    "[--section.key value]...\n"
    "Starts one worker per local rank (torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); fail-fast. Environment:\n"
    "  NGPU           ranks on this node (default: the visible GPUs, else 2 CPU ranks)\n"
    "  NNODES         nodes (default 1)\n"
    "  NODE_RANK      this node (else OMPI_COMM_WORLD_RANK or SLURM_NODEID; default 0)\n"
    "  RDZV_ENDPOINT  host:port of the rendezvous store (required when NNODES > 1)\n"
    "  MODULE         model family, e.g. llama3 or a dotted name (default llama3; --module wins)\n"
    "  CONFIG         named config or .toml file (default <MODULE>_debugmodel; --config wins)\n"
    "  LOG_RANK       ranks echoed to the console: 0, 0,3 or all (default: the rank that logs\n"
    "                 the step line, the first of the last pipeline stage; 0 without one)\n"
    "  MAX_RESTARTS   times to start every worker again after one fails (default 0; not for\n"
    "                 a config error); with checkpoint.enable they resume from the latest\n"
    "                 complete checkpoint; with NNODES > 1 every node restarts together\n"
    "  COMM_MODE      fake_backend: validate the config for the world size in one process\n";

// The tuning keys (of TorchTitan Neuron's best practices) this config sets: model parallelism,
// expert parallelism, HSDP (replicas of FSDP shards), and compile mode.
std::vector<std::string> tuning_keys(const config::JobConfig& job,
                                     const distributed::ParallelDims& dims) {
  std::vector<std::string> out;
  for (const auto& d : config::kMeshDims) {
    if (d.model_parallel && dims.degree(d.dim) > 1)
      out.push_back(std::string("parallelism.") + d.key);
  }
  if (dims.ep > 1) out.push_back("parallelism.expert_parallel_degree");
  if (dims.dp_replicate > 1 && dims.dp_shard > 1) {
    out.push_back("parallelism.data_parallel_replicate_degree");
  }
  if (job.compile.enable) out.push_back("compile.enable");
  return out;
}

// Info, not an error: a tuning run of a model that no `titan validate` has passed for (in its
// dump folder or any other) skips the first best practice (validate an eager baseline).
void note_missing_baseline(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  const auto keys = tuning_keys(job, dims);
  if (keys.empty()) return;
  if (!find_validated_baseline(job.model.name, job.model.flavor, job.job.dump_folder).empty()) {
    return;
  }
  std::cerr << fmt::format(
      "titan launch: info: {} set, but no validated eager baseline of {} {} was found (in {} or "
      "recorded by an earlier titan validate): validate one first (./run_train.sh --validate "
      "with the 1D layout) so that titan compare has a trusted curve to match\n",
      fmt::join(keys, ", "), job.model.name, job.model.flavor, job.job.dump_folder);
}

}  // namespace

int launch_command(const Args& all_args) {
  // --worker NAME picks the worker subcommand (default: train).
  std::string worker = "train";
  Args args;
  for (size_t i = 0; i < all_args.size(); ++i) {
    if (all_args[i] == "--worker" && i + 1 < all_args.size()) {
      worker = all_args[++i];
    } else {
      args.push_back(all_args[i]);
    }
  }
  // run_train.sh's MODULE and CONFIG apply to a launch whose command line does not name them.
  for (const auto& [variable, flag] :
       {std::pair{"CONFIG", "--config"}, std::pair{"MODULE", "--module"}}) {
    const char* value = std::getenv(variable);
    if (value && *value && std::find(args.begin(), args.end(), flag) == args.end()) {
      args.insert(args.begin(), {flag, value});
    }
  }
  auto cli = config::parse_command_line(args);
  if (cli.help) {
    std::cout << kLaunchUsage << "\n" << config::help_text();
    return 0;
  }
  // Everything a worker would reject is rejected here, before any worker starts.
  auto job = config::resolve(cli);
  auto options = distributed::LaunchOptions::from_env();
  config::validate_for_world(job, options.world_size());
  if (options.comm_mode == "fake_backend") {
    return train::dry_run(job, options.world_size(), std::cout);
  }
  if (worker == "train") {
    auto dims = distributed::ParallelDims::from_config(job.parallelism, options.world_size());
    train::check_trainable(job, dims);
    note_missing_baseline(job, dims);
    const char* log_rank = std::getenv("LOG_RANK");
    if (!log_rank || !*log_rank) options.log_rank = std::to_string(train::metrics_rank(job, dims));
  }
  options.dump_folder = job.job.dump_folder;
  options.init_timeout = std::chrono::seconds(job.comm.init_timeout_seconds);
  if (worker == "train" && job.comm.trace_buf_size > 0) {
    options.comm_traces_folder =
        (std::filesystem::path(job.job.dump_folder) / job.comm.save_traces_folder).string();
  }
  options.worker_args = {worker};
  options.worker_args.insert(options.worker_args.end(), args.begin(), args.end());
  return distributed::launch(options);
}

}  // namespace titan::cli
