// Writing a sharded checkpoint in two separately callable steps:
//   1. every rank, in parallel: write_rank_part() puts the bytes of the pieces it writes into
//      rank_<r>.bin and describes them (plus its non-tensor state) in rank_<r>.json;
//   2. rank 0, after all ranks are done (a barrier): finalize_checkpoint() merges the
//      descriptions into metadata.json (checkpoint_metadata.h), checking that every tensor's rows
//      are written exactly once.
// Both write into the folder given (the manager's `step-<N>.tmp`) and fsync what they write;
// renaming the folder into place is the caller's (CheckpointManager's) job.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/distributed/sharded_tensor.h"

namespace titan::components::checkpoint {

/// Section name ("model", "optimizer") -> the pieces this rank holds of it.
using SectionsView = std::map<std::string, const distributed::ShardedStateDict*>;

/// The file names of rank `rank`'s part.
std::string rank_data_file(int rank);   // "rank_<r>.bin"
std::string rank_index_file(int rank);  // "rank_<r>.json"

/// Writes rank `rank`'s part into the existing folder `dir`: rank_<r>.bin holds, back to back in
/// (section, name) order, the raw bytes (dtype as held) of every piece with writer = true and at
/// least one row; rank_<r>.json records each one's dtype, global shape, rows and byte range, the
/// .bin file's size and SHA-256, and `rank_state`. Both files are fsynced. Pieces may live on
/// any device (non-CPU ones are copied to host first). Throws CheckpointError naming the tensor
/// for a piece that does not fit its global shape (check_piece) or a dtype safetensors cannot
/// name, and naming the file on I/O failure.
void write_rank_part(const std::string& dir, int rank, const SectionsView& sections,
                     const nlohmann::json& rank_state);

/// What finalize_checkpoint records beside the tensors.
struct CheckpointHeader {
  int64_t step = 0;
  ModelIdentity model;
  bool model_only = false;
};

/// Rank 0, once ranks 0..world_size-1 have all returned from write_rank_part into `dir`: reads
/// their rank_<r>.json, checks that ranks agree on each tensor's dtype and global shape and that
/// the written rows tile dim 0 exactly once, that each rank_<r>.bin has the size its index
/// records; lists `extra_files` (names inside `dir`, e.g. "config.toml") with their size and
/// SHA-256; writes metadata.json (fsynced, with the folder), removes the rank_<r>.json files and
/// returns the metadata. Throws CheckpointError naming the tensor (rows missing or written by two
/// ranks, ranks disagreeing) or the file (missing, malformed, wrong size).
CheckpointMetadata finalize_checkpoint(const std::string& dir, int world_size,
                                       const CheckpointHeader& header,
                                       const std::vector<std::string>& extra_files = {});

}  // namespace titan::components::checkpoint
