#include <cstdlib>
#include <iostream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launcher.h"
#include "titan/train/dry_run.h"
#include "titan/train/trainer.h"

namespace titan::cli {

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
  // Everything a worker would reject is rejected here, before any worker starts.
  auto job = config::resolve(config::parse_command_line(args));
  auto options = distributed::LaunchOptions::from_env();
  config::validate_for_world(job, options.world_size());
  const char* mode = std::getenv("COMM_MODE");
  if (mode && std::string(mode) == "fake_backend") {
    return train::dry_run(job, options.world_size(), std::cout);
  }
  if (worker == "train") {
    train::check_trainable(job, distributed::ParallelDims::from_config(job.parallelism,
                                                                  options.world_size()));
  }
  options.dump_folder = job.job.dump_folder;
  options.worker_args = {worker};
  options.worker_args.insert(options.worker_args.end(), args.begin(), args.end());
  return distributed::launch(options);
}

}  // namespace titan::cli
