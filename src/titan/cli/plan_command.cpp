// `titan plan`: the layout planner as a command (train/layout_search.h). For the config's model
// on --world ranks of --device, it lists the layouts tried in the recommended order with the memory
// per rank each needs and why it was rejected or chosen, and prints the chosen one's
// overrides; with --check it judges the config's own layout instead.
#include <fmt/format.h>

#include <iostream>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/train/layout_search.h"

namespace titan::cli {
namespace {

constexpr const char* kPlanUsage =
    "Usage: titan plan --module M --config C --world N --device D [--ranks_per_node R]\n"
    "                  [--headroom H] [--check] [--section.key value]...\n"
    "Proposes layouts for the config's model on N ranks of D (trn2, trn3, h100, h200, cpu) in\n"
    "the recommended order: FSDP, then tensor parallelism, then pipeline parallelism, sharding\n"
    "within a node before across nodes; each planned on the meta device against the rank's\n"
    "memory less H (default 0.25: runtime overhead, temporaries and what the estimate leaves\n"
    "out). The first that fits is chosen. --check judges the config's own layout instead.\n"
    "Exit code 0: a layout fits; 1: none does.\n";

const FlagSpec& plan_flags() {
  static const FlagSpec spec{
      "plan", {"world", "device", "ranks_per_node", "headroom"}, {"check"}, 0, kPlanUsage,
      /*config_overrides=*/true};
  return spec;
}

void print_row(const train::LayoutProposal& p) {
  const std::string memory =
      p.bytes_per_rank ? fmt::format("{:.2f} GiB", *p.bytes_per_rank / (1024.0 * 1024 * 1024))
                       : "-";
  std::cout << fmt::format("| {} | {} | {} |\n", p.layout, memory, p.reason);
}

}  // namespace

int plan_command(const Args& args) {
  const auto flags = Flags::parse(plan_flags(), args);
  const int64_t world = flags.get_int("world", 0);
  const double headroom = flags.get_double("headroom", 0.25);
  if (world < 1 || headroom < 0 || headroom >= 1) {
    flags.fail("--world must be at least 1 and --headroom in [0, 1)");
  }
  const auto job = config::resolve(config::parse_command_line(flags.overrides()));
  auto device = train::device_profile(flags.required("device"), static_cast<int>(world));
  if (flags.has("ranks_per_node")) {
    const int64_t per_node = flags.get_int("ranks_per_node", 0);
    if (per_node < 1) flags.fail("--ranks_per_node must be at least 1");
    device.ranks_per_node = static_cast<int>(per_node);
  }
  std::cout << fmt::format(
      "titan plan: {} {} on {} {} ranks ({:.1f} GiB per rank, {} per node, tp up to {}; "
      "headroom {:.0f}%)\n  {}\n  seq_len {}, local batch {}, activation checkpointing {}\n\n",
      job.model.name, job.model.flavor, world, device.name,
      device.memory_bytes / (1024.0 * 1024 * 1024), device.ranks_per_node, device.max_tp,
      100 * headroom, device.source, job.training.seq_len, job.training.local_batch_size,
      job.activation_checkpoint.mode);
  if (world % device.ranks_per_node != 0 && device.ranks_per_node % world != 0) {
    std::cout << fmt::format(
        "note: --world {} is not a whole number of {} nodes ({} ranks each), nor a part of one: "
        "every parallel degree must divide the world, which leaves only the degrees dividing "
        "{}; a {} job takes whole nodes (the next is --world {}), or give --ranks_per_node\n\n",
        world, device.name, device.ranks_per_node, world, device.name,
        (world + device.ranks_per_node - 1) / device.ranks_per_node * device.ranks_per_node);
  }
  std::cout << "| layout | memory per rank | verdict |\n|---|---|---|\n";
  if (flags.has("check")) {
    const auto p = train::check_layout(job, static_cast<int>(world), device, headroom);
    print_row(p);
    return p.chosen ? 0 : 1;
  }
  const auto proposals = train::propose_layouts(job, static_cast<int>(world), device, headroom);
  for (const auto& p : proposals) print_row(p);
  if (proposals.empty() || !proposals.back().chosen) {
    std::cout << "\nno layout fits: more ranks, a shorter sequence or a smaller batch\n";
    return 1;
  }
  const auto& p = proposals.back().parallelism;
  std::cout << fmt::format(
      "\nchosen: {}: --parallelism.data_parallel_replicate_degree {} "
      "--parallelism.data_parallel_shard_degree {} --parallelism.tensor_parallel_degree {} "
      "--parallelism.pipeline_parallel_degree {} --parallelism.context_parallel_degree {}\n",
      proposals.back().layout, p.data_parallel_replicate_degree, p.data_parallel_shard_degree,
      p.tensor_parallel_degree, p.pipeline_parallel_degree, p.context_parallel_degree);
  return 0;
}

}  // namespace titan::cli
