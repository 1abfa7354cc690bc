// Test helper: the full tensors of one section of a titan checkpoint folder, read through the
// library's own reader (any layout the checkpoint was written under).
#pragma once

#include <filesystem>
#include <string>

#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/components/checkpoint/safetensors.h"
#include "titan/components/checkpoint/shard_reader.h"

namespace titan::testing {

inline components::TensorMap read_checkpoint(const std::filesystem::path& dir,
                                             const std::string& section) {
  namespace ckpt = components::checkpoint;
  const auto metadata = ckpt::read_metadata(dir.string());
  distributed::ShardedStateDict pieces;
  for (const auto& [name, record] : metadata.sections.at(section)) {
    distributed::ShardedTensor piece;
    piece.local = torch::zeros(record.global_shape, torch::kFloat32);
    piece.global_shape = record.global_shape;
    pieces.emplace(name, piece);
  }
  ckpt::read_sections(dir.string(), metadata, {{section, &pieces}});
  components::TensorMap out;
  for (auto& [name, piece] : pieces) out[name] = piece.local;
  return out;
}

}  // namespace titan::testing
