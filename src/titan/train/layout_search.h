// `titan plan`'s search: layouts for a model on a world of ranks of one device, proposed in the
// recommended order (TorchTitan Neuron's best practices: the least model parallelism first: FSDP,
// then tensor parallelism within a node, then pipeline parallelism, with FSDP's shards kept inside
// a node and the replicate degree across nodes; sharding across nodes only once none of those
// fits), each planned on the meta device (plan_heaviest_rank) and kept or rejected against the
// device's memory per rank less a headroom.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::train {

/// What one rank of a device holds and how many share a node.
struct DeviceProfile {
  std::string name;
  double memory_bytes = 0;  // per rank
  int ranks_per_node = 0;
  int max_tp = 0;      // the largest tensor-parallel degree kept on the fastest links
  std::string source;  // where the figures come from
};

/// trn2, trn3, h100, h200 or cpu (this machine: its memory over `cpu_ranks` ranks). Throws
/// ConfigError naming the known ones for another name.
DeviceProfile device_profile(const std::string& name, int cpu_ranks);

struct LayoutProposal {
  config::ParallelismSection parallelism;  // the degrees to set
  std::string layout;                      // "tp4 x fsdp16", "pp2 x tp4 x fsdp8 x replicate2"
  std::optional<double> bytes_per_rank;    // none: the layout cannot run (see reason)
  bool chosen = false;
  std::string reason;
};

/// The candidates of `job` on `world` ranks of `device` in the recommended order, up to and
/// including the first that fits within (1 - headroom) of the device's memory per rank (that
/// one chosen), or all of them when none fits.
std::vector<LayoutProposal> propose_layouts(const config::JobConfig& job, int world,
                                            const DeviceProfile& device, double headroom);

/// `job`'s own layout on `world` ranks of `device`, planned and judged the same way.
LayoutProposal check_layout(const config::JobConfig& job, int world, const DeviceProfile& device,
                            double headroom);

/// "tp4 x fsdp16"-style name of a parallelism section's degrees on `world` ranks.
std::string describe_layout(const config::ParallelismSection& p, int world);

}  // namespace titan::train
