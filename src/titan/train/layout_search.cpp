#include "titan/train/layout_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "titan/config/mesh_dims.h"
#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/platform/device.h"
#include "titan/train/dry_run.h"

namespace titan::train {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The part of an estimate that dominates, for a rejection's reason.
std::string largest_parts(const tools::MemoryEstimate& m) {
  return fmt::format(
      "state {:.1f} GiB, activations {:.1f} GiB, logits {:.1f} GiB, FSDP gather "
      "{:.1f} GiB",
      (m.params + m.grads + m.optimizer) / kGiB, m.activations / kGiB, m.logits / kGiB,
      m.gathered / kGiB);
}

LayoutProposal judge(config::JobConfig job, int world, const DeviceProfile& device,
                     double headroom) {
  LayoutProposal out;
  out.parallelism = job.parallelism;
  out.layout = describe_layout(job.parallelism, world);
  const double budget = (1.0 - headroom) * device.memory_bytes;
  try {
    const auto plan = plan_heaviest_rank(job, world);
    out.bytes_per_rank = plan.memory.total();
    if (*out.bytes_per_rank > budget) {
      out.reason =
          fmt::format("over the {:.1f} GiB budget ({})", budget / kGiB, largest_parts(plan.memory));
    } else {
      out.chosen = true;
      out.reason = fmt::format("within the {:.1f} GiB budget ({})", budget / kGiB,
                               largest_parts(plan.memory));
    }
  } catch (const ConfigError& e) {
    out.reason = std::string("cannot run: ") + e.what();
  }
  return out;
}

}  // namespace

DeviceProfile device_profile(const std::string& name, int cpu_ranks) {
  if (name == "trn2") {
    return {"trn2", 24 * kGiB, 64, 4,
            "trn2.48xlarge: 16 Trainium2 chips of 96 GiB HBM; LNC2 makes 4 logical cores a "
            "chip, 64 ranks of about 24 GiB; TP4 stays within a chip"};
  }
  if (name == "trn3") {
    return {"trn3", 36 * kGiB, 64, 4,
            "Trainium3: 144 GiB HBM a chip; LNC2 makes 4 logical cores a chip, ranks of about "
            "36 GiB; 64 ranks a node assumed (16 chips as trn2: pass --ranks_per_node for yours)"};
  }
  if (name == "h100") {
    return {"h100", 80 * kGiB, 8, 8, "H100 SXM: 80 GiB HBM3, 8 GPUs a node on NVLink"};
  }
  if (name == "h200") {
    return {"h200", 141e9, 8, 8, "H200 SXM: 141 GB HBM3e, 8 GPUs a node on NVLink"};
  }
  if (name == "cpu") {
    const double bytes = static_cast<double>(platform::device_capacity_bytes(torch::kCPU));
    return {"cpu", bytes / cpu_ranks, cpu_ranks, cpu_ranks,
            fmt::format("this machine: {:.1f} GiB over {} ranks", bytes / kGiB, cpu_ranks)};
  }
  throw ConfigError(fmt::format("--device {}: titan knows trn2, trn3, h100, h200 and cpu", name));
}

std::string describe_layout(const config::ParallelismSection& p, int world) {
  using D = config::MeshDim;
  std::string out;
  // Model parallelism first, then the data-parallel dimensions; FSDP named even at degree 1
  // when nothing else is.
  for (D dim : {D::PP, D::TP, D::CP, D::DpShard, D::DpReplicate}) {
    const auto& d = config::mesh_dim(dim);
    const int64_t degree = dim == D::DpShard ? config::shard_degree(p, world) : p.*d.degree;
    if (degree > 1 || (dim == D::DpShard && out.empty())) {
      out += fmt::format("{}{}{}", out.empty() ? "" : " x ", d.label, degree);
    }
  }
  return out;
}

std::vector<LayoutProposal> propose_layouts(const config::JobConfig& job, int world,
                                            const DeviceProfile& device, double headroom) {
  std::vector<LayoutProposal> out;
  // Shards kept inside a node (the replicate degree across nodes) in the recommended order; then,
  // as the last resort, shards across nodes.
  for (bool across_nodes : {false, true}) {
    for (int64_t pp = 1; pp <= world; pp *= 2) {
      for (int64_t tp = 1; tp <= device.max_tp && pp * tp <= world; tp *= 2) {
        if (world % (pp * tp) != 0) continue;
        const int64_t dp = world / (pp * tp);
        const int64_t node = std::min<int64_t>(device.ranks_per_node, world);  // ranks in one
        const int64_t in_node = std::max<int64_t>(1, node / tp);
        const int64_t shard = across_nodes ? dp : std::gcd(dp, in_node);
        if (across_nodes && shard <= in_node) continue;  // already tried inside a node
        config::JobConfig candidate = job;
        auto& p = candidate.parallelism;
        p.pipeline_parallel_degree = pp;
        p.tensor_parallel_degree = tp;
        p.context_parallel_degree = 1;
        p.data_parallel_shard_degree = shard;
        p.data_parallel_replicate_degree = dp / shard;
        out.push_back(judge(candidate, world, device, headroom));
        if (out.back().chosen) {
          out.back().reason = "chosen: the least model parallelism " + out.back().reason;
          return out;
        }
      }
    }
  }
  return out;
}

LayoutProposal check_layout(const config::JobConfig& job, int world, const DeviceProfile& device,
                            double headroom) {
  auto out = judge(job, world, device, headroom);
  if (out.chosen) out.reason = "fits: " + out.reason;
  return out;
}

}  // namespace titan::train
