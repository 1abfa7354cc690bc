// A read-only memory map of a whole file: dataset files are parsed and hashed from it, and the
// token cache is read from it without copying (pages load on first touch and are shared by all
// ranks on a node).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace titan::components::data {

class MappedFile {
 public:
  /// An empty view.
  MappedFile() = default;
  /// Maps `path` read-only. An empty file gives an empty view (no mapping).
  /// Throws DataError naming the file and the system error when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The file's bytes; valid while this object lives.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  size_t size() const { return size_; }

 private:
  void release();

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace titan::components::data
