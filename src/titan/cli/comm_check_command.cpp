#include <fmt/format.h>

#include <cstdlib>

#include "titan/cli/commands.h"
#include "titan/config/resolve.h"
#include "titan/distributed/process_group.h"
#include "titan/platform/logging.h"

namespace titan::cli {

int comm_check_command(const Args& args) {
  // TITAN_COMM_CHECK_FAIL_RANK=R: rank R exits with code 1 after joining, so tests can check
  // the launcher's fail-fast while the other ranks wait in a collective.
  const char* fail_env = std::getenv("TITAN_COMM_CHECK_FAIL_RANK");
  int fail_rank = fail_env ? std::atoi(fail_env) : -1;
  auto job = config::resolve(config::parse_command_line(args));
  auto info = distributed::WorldInfo::from_env();
  log::init_rank(job.job.dump_folder, info.rank, info.world_size);
  distributed::CommTimeouts timeouts{std::chrono::seconds(job.comm.init_timeout_seconds),
                                     std::chrono::seconds(job.comm.train_timeout_seconds)};
  auto world = distributed::World::join(info, timeouts);
  if (info.rank == fail_rank) {
    log::error("rank {} failing on purpose (--fail_rank)", info.rank);
    return 1;
  }
  auto t = torch::tensor({static_cast<double>(info.rank + 1)}, torch::kDouble);
  world->global()->all_reduce_(t, distributed::ReduceOp::Sum, "comm-check all-reduce");
  double expected = info.world_size * (info.world_size + 1) / 2.0;
  auto gathered = world->global()->all_gather(torch::tensor({info.rank}, torch::kLong),
                                              "comm-check all-gather");
  bool gather_ok = torch::equal(gathered, torch::arange(info.world_size, torch::kLong));
  bool ok = t.item<double>() == expected && gather_ok;
  log::info("comm check: world {} (local {}), all_reduce sum {} (expected {}), all_gather {}",
            info.world_size, info.local_world_size, t.item<double>(), expected,
            gather_ok ? "ok" : "WRONG");
  world->global()->barrier("comm-check end");
  return ok ? 0 : 1;
}

}  // namespace titan::cli
