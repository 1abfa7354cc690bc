// The device mesh as a small value type (TorchTitan's ParallelDims): the degree of each
// dimension, validation against the world size, and which ranks share a group. The dimensions
// and their order are config/mesh_dims.h's: [pp, dp_replicate, dp_shard, cp, tp], tp varying
// fastest, as in TorchTitan. Expert
// parallelism borrows its ranks from the dense region dp_shard x cp x tp, which TorchTitan's
// sparse mesh [pp, dp_replicate, efsdp, ep] lays out again with ep fastest: ep consecutive
// ranks of the region hold different experts, and the efsdp ranks that hold the same experts
// shard them (FSDP of the expert weights).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/config/mesh_dims.h"

namespace titan::distributed {

using config::MeshDim;

struct ParallelDims {
  int pp = 1;
  int dp_replicate = 1;
  int dp_shard = 1;  // resolved: never -1
  int cp = 1;
  int tp = 1;
  int ep = 1;
  int world_size = 1;

  /// Degrees from `parallelism.*` with data_parallel_shard_degree = -1 resolved to the leftover
  /// ranks. Throws ConfigError when the product differs from `world_size`
  /// (config::resolve_shard_degree) or when expert_parallel_degree does not divide
  /// dp_shard x cp x tp.
  static ParallelDims from_config(const config::ParallelismSection& p, int world_size);

  /// The degree of mesh dimension `d` (its field above).
  int degree(MeshDim d) const;
  int& degree(MeshDim d);

  int dp() const { return dp_replicate * dp_shard; }
  bool dp_enabled() const { return dp() > 1; }
  bool dp_replicate_enabled() const { return dp_replicate > 1; }
  /// Parameters sharded (FSDP over dp_shard x cp).
  bool fsdp_enabled() const { return dp_shard * cp > 1; }
  bool tp_enabled() const { return tp > 1; }
  bool cp_enabled() const { return cp > 1; }
  bool pp_enabled() const { return pp > 1; }
  bool ep_enabled() const { return ep > 1; }
  /// Ranks sharding the expert weights that hold the same experts: dp_shard x cp x tp / ep.
  int efsdp() const { return dp_shard * cp * tp / ep; }
  /// Ranks that work on the same batch: tps and MFU are per rank of these (TorchTitan).
  int non_data_parallel_size() const { return cp * tp * pp; }

  /// Coordinates of global `rank` on each mesh dimension.
  std::array<int, 5> coords(int rank) const;
  /// The lowest global rank on pipeline rank `pp_rank` (pp is the outermost dimension).
  int first_rank_at_pp(int pp_rank) const { return pp_rank * (world_size / pp); }
  /// Data-parallel rank (replicate x shard flattened): decides which batch a rank reads.
  int dp_rank(int rank) const;
  /// Global ranks that share every coordinate with `rank` except those in `dims`, ordered by
  /// the flattened coordinate of `dims` (the members of rank's group over those dimensions).
  std::vector<int> group_ranks(int rank, const std::vector<MeshDim>& dims) const;

  /// The members of `rank`'s expert-parallel group (`ep_group` true: the ep consecutive ranks
  /// of its sparse region) or of its expert-FSDP group (the efsdp ranks with its ep index).
  std::vector<int> sparse_group_ranks(int rank, bool ep_group) const;

  /// "pp 1 x dp_replicate 1 x dp_shard 4 x cp 1 x tp 1 (world 4)".
  std::string describe() const;
  /// Logs the layout, and warns when data_parallel_shard_degree = -1 made FSDP shard across
  /// nodes of `local_world_size` ranks (suggesting HSDP).
  void log_layout(const config::ParallelismSection& p, int local_world_size) const;
};

}  // namespace titan::distributed
