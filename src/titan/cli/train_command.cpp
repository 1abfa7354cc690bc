#include <fmt/format.h>

#include <iostream>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launcher.h"
#include "titan/distributed/process_group.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"
#include "titan/train/trainer.h"

namespace titan::cli {

int train_command(const Args& args) {
  auto cli = config::parse_command_line(args);
  if (cli.help) {
    std::cout << config::help_text();
    return 0;
  }
  auto job = config::resolve(cli);
  auto world = distributed::WorldInfo::from_env();
  config::validate_for_world(job, world.world_size);
  log::init_rank(job.job.dump_folder, world.rank, world.world_size);
  try {
    train::Trainer trainer(job, world);
    trainer.train();
  } catch (const ConfigError& e) {
    log::error("config error: {}", e.what());
    return distributed::kConfigErrorExitCode;
  } catch (const DivergedError& e) {
    log::error("rank {} stopped: {}", world.rank, e.what());
    return distributed::kDivergedExitCode;
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
