#include "titan/components/checkpoint/shard_reader.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "titan/components/checkpoint/file_io.h"
#include "titan/components/data/sha256.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace {

namespace fs = std::filesystem;

// The checkpoint's files, each opened and verified on first use.
class VerifiedFiles {
 public:
  VerifiedFiles(const std::string& dir, const CheckpointMetadata& metadata)
      : dir_(dir), metadata_(metadata) {}

  const MappedFile& get(const std::string& name) {
    auto it = open_.find(name);
    if (it != open_.end()) return *it->second;
    const std::string path = (fs::path(dir_) / name).string();
    const FileRecord& expected = metadata_.files.at(name);  // metadata_from_json checked it
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) {
      throw CheckpointError(fmt::format("{}: missing ({}); the checkpoint is incomplete", path,
                                        ec.message()));
    }
    if (size != expected.bytes) {
      throw CheckpointError(fmt::format("{}: {} bytes, metadata.json records {} (truncated or "
                                        "overwritten)",
                                        path, size, expected.bytes));
    }
    auto file = std::make_unique<MappedFile>(path);
    const std::string digest = data::sha256_hex(file->bytes());
    if (digest != expected.sha256) {
      throw CheckpointError(fmt::format("{}: SHA-256 {} differs from metadata.json's {} (the file "
                                        "is corrupt)",
                                        path, digest, expected.sha256));
    }
    return *open_.emplace(name, std::move(file)).first->second;
  }

 private:
  std::string dir_;
  const CheckpointMetadata& metadata_;
  std::map<std::string, std::unique_ptr<MappedFile>> open_;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  return nlohmann::json(shape).dump();
}

// Copies the rows of `record` that `piece` covers into piece.local.
void fill_piece(const std::string& section, const std::string& name,
                distributed::ShardedTensor& piece, const TensorRecord& record,
                VerifiedFiles& files) {
  distributed::check_piece(name, piece);
  if (record.global_shape != piece.global_shape) {
    throw CheckpointError(fmt::format("{} tensor '{}': the checkpoint holds global shape {}, this "
                                      "run expects {}",
                                      section, name, shape_text(record.global_shape),
                                      shape_text(piece.global_shape)));
  }
  const int64_t begin = piece.row_offset;
  const int64_t end = begin + distributed::local_rows(piece);
  if (begin == end) return;
  const bool direct = piece.local.device().is_cpu() && piece.local.is_contiguous() &&
                      piece.local.scalar_type() == record.dtype;
  // dst: [rows, ...] in the stored dtype; piece.local itself when no conversion is needed.
  torch::Tensor dst = direct ? piece.local
                             : torch::empty(piece.local.sizes(),
                                            torch::TensorOptions().dtype(record.dtype));
  const uint64_t row_bytes = static_cast<uint64_t>(distributed::row_numel(record.global_shape)) *
                             c10::elementSize(record.dtype);
  char* out = static_cast<char*>(dst.data_ptr());
  int64_t covered = 0;
  for (const auto& c : record.chunks) {
    const int64_t lo = std::max(begin, c.row_offset);
    const int64_t hi = std::min(end, c.row_offset + c.rows);
    if (lo >= hi) continue;
    const MappedFile& file = files.get(c.file);
    const uint64_t from = c.offset + static_cast<uint64_t>(lo - c.row_offset) * row_bytes;
    std::memcpy(out + static_cast<uint64_t>(lo - begin) * row_bytes, file.bytes().data() + from,
                static_cast<uint64_t>(hi - lo) * row_bytes);
    covered += hi - lo;
  }
  if (covered != end - begin) {
    throw CheckpointError(fmt::format("{} tensor '{}': the checkpoint lacks some of rows [{}, {})",
                                      section, name, begin, end));
  }
  if (!direct) {
    torch::NoGradGuard no_grad;
    piece.local.copy_(dst);
  }
}

}  // namespace

void read_sections(const std::string& dir, const CheckpointMetadata& metadata,
                   const SectionsRef& sections) {
  VerifiedFiles files(dir, metadata);
  for (const auto& [section, dict] : sections) {
    auto records = metadata.sections.find(section);
    for (auto& [name, piece] : *dict) {
      if (records == metadata.sections.end() || records->second.count(name) == 0) {
        throw CheckpointError(fmt::format("{}: {} tensor '{}' is missing from the checkpoint",
                                          (fs::path(dir) / kMetadataFile).string(), section,
                                          name));
      }
      fill_piece(section, name, piece, records->second.at(name), files);
    }
  }
}

}  // namespace titan::components::checkpoint
