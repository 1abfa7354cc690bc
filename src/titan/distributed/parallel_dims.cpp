#include "titan/distributed/parallel_dims.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"

namespace titan::distributed {
namespace {

// The field of each mesh dimension, in mesh order.
constexpr int ParallelDims::*kDegrees[] = {&ParallelDims::pp, &ParallelDims::dp_replicate,
                                           &ParallelDims::dp_shard, &ParallelDims::cp,
                                           &ParallelDims::tp};

std::array<int, 5> sizes_of(const ParallelDims& d) {
  std::array<int, 5> sizes{};
  for (int i = 0; i < 5; ++i) sizes[i] = d.*kDegrees[i];
  return sizes;
}

int rank_of(const std::array<int, 5>& coords, const std::array<int, 5>& sizes) {
  int r = 0;
  for (int i = 0; i < 5; ++i) r = r * sizes[i] + coords[i];
  return r;
}

}  // namespace

ParallelDims ParallelDims::from_config(const config::ParallelismSection& p, int world_size) {
  ParallelDims d;
  for (const auto& spec : config::kMeshDims) d.degree(spec.dim) = static_cast<int>(p.*spec.degree);
  d.ep = static_cast<int>(p.expert_parallel_degree);
  d.world_size = world_size;
  d.dp_shard = static_cast<int>(config::resolve_shard_degree(p, world_size));
  const int region = d.dp_shard * d.cp * d.tp;
  if (d.ep < 1 || region % d.ep != 0) {
    throw ConfigError(fmt::format(
        "parallelism.expert_parallel_degree = {} must divide the ranks it borrows from: "
        "data_parallel_shard_degree x context_parallel_degree x tensor_parallel_degree = "
        "{} x {} x {} = {}",
        d.ep, d.dp_shard, d.cp, d.tp, region));
  }
  return d;
}

int ParallelDims::degree(MeshDim d) const { return this->*kDegrees[static_cast<int>(d)]; }
int& ParallelDims::degree(MeshDim d) { return this->*kDegrees[static_cast<int>(d)]; }

std::array<int, 5> ParallelDims::coords(int rank) const {
  auto sizes = sizes_of(*this);
  std::array<int, 5> c{};
  for (int i = 4; i >= 0; --i) {
    c[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return c;
}

int ParallelDims::dp_rank(int rank) const {
  auto c = coords(rank);
  return c[1] * dp_shard + c[2];
}

std::vector<int> ParallelDims::group_ranks(int rank, const std::vector<MeshDim>& dims) const {
  auto sizes = sizes_of(*this);
  auto base = coords(rank);
  int count = 1;
  for (MeshDim d : dims) count *= sizes[static_cast<int>(d)];
  std::vector<int> ranks;
  for (int flat = 0; flat < count; ++flat) {
    auto c = base;
    int rest = flat;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      int i = static_cast<int>(*it);
      c[i] = rest % sizes[i];
      rest /= sizes[i];
    }
    ranks.push_back(rank_of(c, sizes));
  }
  return ranks;
}

std::vector<int> ParallelDims::sparse_group_ranks(int rank, bool ep_group) const {
  const int region = dp_shard * cp * tp;  // the last mesh dimensions: contiguous ranks
  const int outer = rank / region, in_region = rank % region;
  const int ep_index = in_region % ep, efsdp_index = in_region / ep;
  std::vector<int> ranks;
  const int count = ep_group ? ep : efsdp();
  for (int i = 0; i < count; ++i) {
    const int member = ep_group ? efsdp_index * ep + i : i * ep + ep_index;
    ranks.push_back(outer * region + member);
  }
  return ranks;
}

std::string ParallelDims::describe() const {
  std::vector<std::string> dims;
  for (const auto& spec : config::kMeshDims) {
    dims.push_back(fmt::format("{} {}", spec.name, degree(spec.dim)));
  }
  return fmt::format("{} (world {}, ep {})", fmt::join(dims, " x "), world_size, ep);
}

void ParallelDims::log_layout(const config::ParallelismSection& p, int local_world_size) const {
  log::info("Parallel layout: {}; FSDP shards over {} rank(s), {} replica(s)", describe(),
            dp_shard * cp, dp_replicate);
  const bool multi_node = world_size > local_world_size;
  if (multi_node && p.data_parallel_shard_degree == -1 && dp_shard > local_world_size) {
    log::warn("data_parallel_shard_degree = -1 resolved to {}, so FSDP shards across nodes and "
              "every all-gather crosses the network; set "
              "parallelism.data_parallel_replicate_degree = {} (HSDP: shard within a node, "
              "replicate across nodes)",
              dp_shard, dp_shard / local_world_size);
  }
}

}  // namespace titan::distributed
