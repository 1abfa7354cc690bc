#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launcher.h"
#include "titan/distributed/process_group.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

// LOG_RANK: "0" (default), "0,3", or "all".
bool rank_logs_to_console(int rank) {
  const char* env = std::getenv("LOG_RANK");
  std::string spec = env ? env : "0";
  if (spec == "all") return true;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == std::to_string(rank)) return true;
  }
  return false;
}

}  // namespace

int train_command(const Args& args) {
  auto cli = config::parse_command_line(args);
  if (cli.help) {
    std::cout << config::help_text();
    return 0;
  }
  auto job = config::resolve(cli);
  auto world = distributed::WorldInfo::from_env();
  config::validate_for_world(job, world.world_size);
  log::init(fmt::format("{}/logs/rank_{}.log", job.job.dump_folder, world.rank),
            rank_logs_to_console(world.rank),
            world.world_size > 1 ? fmt::format("[rank{}]:", world.rank) : "");
  try {
    train::Trainer trainer(job, world);
    trainer.train();
  } catch (const ConfigError& e) {
    log::error("config error: {}", e.what());
    return 2;
  } catch (const CommError& e) {
    log::error("rank {} stopped: {}", world.rank, e.what());
    return distributed::kPeerFailedExitCode;
  } catch (const std::exception& e) {
    log::error("rank {} failed: {}", world.rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace titan::cli
