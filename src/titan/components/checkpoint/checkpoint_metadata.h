// metadata.json of a titan checkpoint folder (`step-<N>/`): what every tensor is (dtype, global
// shape) and where its rows lie (file, rows, byte range), the size and SHA-256 of every file, the
// model it belongs to, and each rank's non-tensor state. Written last, by rank 0, once every
// rank's files are on disk; a folder is complete exactly when it holds a valid metadata.json.
// The layout follows PyTorch Distributed Checkpoint's idea (a global metadata file beside
// per-rank data files, torch.distributed.checkpoint.metadata) with dim-0 row chunks only.
//
//   {"format": "titan-checkpoint", "version": 1, "step": 10,
//    "model": {"family": "llama3", "flavor": "debugmodel"}, "model_only": false,
//    "world_size": 2,
//    "files": {"rank_0.bin": {"bytes": 123, "sha256": "..."}, ...},
//    "sections": {"model": {"norm.weight": {"dtype": "F32", "global_shape": [256],
//                   "chunks": [{"file": "rank_0.bin", "row_offset": 0, "rows": 128,
//                               "offset": 0, "bytes": 512}, ...]}, ...},
//                 "optimizer": {...}},
//    "rank_states": [{...}, {...}]}
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::components::checkpoint {

constexpr const char* kFormatName = "titan-checkpoint";
constexpr int kFormatVersion = 1;
constexpr const char* kMetadataFile = "metadata.json";

/// The model a checkpoint belongs to; loading into another one is refused.
struct ModelIdentity {
  std::string family;  // TrainSpec name: "llama3"
  std::string flavor;  // "debugmodel"

  bool operator==(const ModelIdentity& o) const {
    return family == o.family && flavor == o.flavor;
  }
};

/// Rows [row_offset, row_offset + rows) of a tensor, stored as `bytes` contiguous bytes at byte
/// `offset` of `file` (a name inside the checkpoint folder).
struct Chunk {
  std::string file;
  int64_t row_offset = 0;
  int64_t rows = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

/// One tensor: dtype as stored, global shape, and its chunks (sorted by row_offset).
struct TensorRecord {
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<int64_t> global_shape;
  std::vector<Chunk> chunks;
};

/// Section ("model", "optimizer") -> tensor name -> record.
using SectionRecords = std::map<std::string, std::map<std::string, TensorRecord>>;

struct FileRecord {
  uint64_t bytes = 0;
  std::string sha256;  // lower-case hex
};

struct CheckpointMetadata {
  int64_t step = 0;
  ModelIdentity model;
  /// True when the checkpoint holds model weights only (last_save_model_only, seed checkpoints,
  /// Hugging Face imports): loading it restores the model and nothing else.
  bool model_only = false;
  int world_size = 1;
  std::map<std::string, FileRecord> files;
  SectionRecords sections;
  /// Index = the writing rank; each is what that rank passed as its rank_state.
  std::vector<nlohmann::json> rank_states;
};

/// JSON of `sections` (the "sections" value above).
nlohmann::json sections_to_json(const SectionRecords& sections);

/// Parses and checks a "sections" value: dtypes known, shapes non-negative, every chunk's rows
/// inside the global rows and its bytes = rows x row size x dtype size. `where` (a file name)
/// prefixes errors. Throws CheckpointError naming `where` and the tensor.
SectionRecords sections_from_json(const nlohmann::json& j, const std::string& where);

nlohmann::json to_json(const CheckpointMetadata& metadata);

/// Parses and checks a whole metadata value (format name and version, every chunk's file listed
/// in "files" and its byte range inside that file's size). Throws CheckpointError naming `where`
/// and the key or tensor at fault.
CheckpointMetadata metadata_from_json(const nlohmann::json& j, const std::string& where);

/// `<step_dir>/metadata.json`, parsed and checked. Throws CheckpointError naming the file when
/// it is missing ("incomplete or not a titan checkpoint"), not JSON, or fails the checks above.
CheckpointMetadata read_metadata(const std::string& step_dir);

/// Writes `<step_dir>/metadata.json` and fsyncs it and the folder. Throws CheckpointError naming
/// the file on I/O failure.
void write_metadata(const std::string& step_dir, const CheckpointMetadata& metadata);

}  // namespace titan::components::checkpoint
