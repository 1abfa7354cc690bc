// Reading a sharded checkpoint into any layout (resharding): each local piece takes, from
// whichever files hold them, just the byte ranges of the rows it covers, so a checkpoint written
// by one parallel layout (1 rank, FSDP 2, FSDP 4, HSDP) loads under any other.
#pragma once

#include <map>
#include <string>

#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/distributed/sharded_tensor.h"

namespace titan::components::checkpoint {

/// Section name ("model", "optimizer") -> the pieces to fill, in place.
using SectionsRef = std::map<std::string, distributed::ShardedStateDict*>;

/// Fills every piece of `sections` from the checkpoint folder `dir` that `metadata` describes
/// (read_metadata(dir)): for each piece, the chunks overlapping its rows [row_offset,
/// row_offset + rows) are copied (only the overlapping bytes) into `local`, converted to the
/// piece's dtype and device when they differ from the stored ones. Every file read from is first
/// checked against metadata: its size, then its SHA-256 (each file once per call).
/// Throws CheckpointError naming the tensor when the checkpoint lacks its section or the tensor,
/// when its global shape differs from the piece's, or when the piece does not fit its own global
/// shape; and naming the file when it is missing, truncated (size differs) or corrupt (checksum
/// differs).
void read_sections(const std::string& dir, const CheckpointMetadata& metadata,
                   const SectionsRef& sections);

}  // namespace titan::components::checkpoint
