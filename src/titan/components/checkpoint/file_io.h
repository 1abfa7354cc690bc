// Durable file I/O for checkpoints (POSIX): whole-file writes that reach the disk (fsync) before
// a checkpoint is declared complete, folder syncs after entries are created or renamed, and
// read-only memory maps from which byte ranges are copied out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace titan::components::checkpoint {

/// Bytes to write: `size` bytes at `data`.
struct ByteSpan {
  const void* data = nullptr;
  uint64_t size = 0;
};

/// Writes `parts` back to back to `path` (created or truncated), then fsyncs it. Throws
/// CheckpointError naming the file and the system's reason (disk full, permission, ...).
void write_file_synced(const std::string& path, const std::vector<ByteSpan>& parts);

/// write_file_synced of one string.
void write_file_synced(const std::string& path, std::string_view text);

/// fsync of an existing file or folder (a folder after entries were created, renamed or
/// removed in it). Throws CheckpointError naming the path.
void sync_path(const std::string& path);

/// Moves the folder `from` to `to` by rename(2) and syncs their parent folder, so that `to`
/// appears complete or not at all. An existing `to` is first renamed to `to`.old.tmp and removed
/// afterwards, so some complete `to` exists at every instant. Both must be in one file system.
/// Throws CheckpointError naming both paths.
void replace_directory(const std::string& from, const std::string& to);

/// A read-only, private memory map of a whole file (an empty file maps to no bytes).
class MappedFile {
 public:
  /// Throws CheckpointError naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  /// The whole file's bytes.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  std::string path_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

/// Lower-case hex SHA-256 of the file at `path` (through MappedFile).
std::string file_sha256(const std::string& path);

}  // namespace titan::components::checkpoint
