#include "titan/components/checkpoint/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "titan/components/data/sha256.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace {

// Linux moves at most 0x7ffff000 bytes per write(2).
constexpr uint64_t kMaxWrite = 1ull << 30;

std::string os_error() { return std::strerror(errno); }

class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags, mode)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void write_file_synced(const std::string& path, const std::vector<ByteSpan>& parts) {
  Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd.get() < 0) {
    throw CheckpointError(fmt::format("{}: cannot open for writing ({})", path, os_error()));
  }
  for (const auto& part : parts) {
    const char* p = static_cast<const char*>(part.data);
    uint64_t left = part.size;
    while (left > 0) {
      const ssize_t n = ::write(fd.get(), p, std::min(left, kMaxWrite));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw CheckpointError(fmt::format("{}: write failed ({})", path, os_error()));
      }
      p += n;
      left -= static_cast<uint64_t>(n);
    }
  }
  if (::fsync(fd.get()) != 0) {
    throw CheckpointError(fmt::format("{}: fsync failed ({})", path, os_error()));
  }
}

void write_file_synced(const std::string& path, std::string_view text) {
  write_file_synced(path, {ByteSpan{text.data(), text.size()}});
}

void sync_path(const std::string& path) {
  Fd fd(path, O_RDONLY | O_CLOEXEC);
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    throw CheckpointError(fmt::format("{}: fsync failed ({})", path, os_error()));
  }
}

void replace_directory(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  const std::string old = to + ".old.tmp";
  std::error_code ec;
  fs::remove_all(old, ec);
  const bool had_old = fs::exists(to);
  if (had_old) {
    fs::rename(to, old, ec);
    if (ec) {
      throw CheckpointError(fmt::format("cannot move {} aside to {} ({})", to, old, ec.message()));
    }
  }
  fs::rename(from, to, ec);
  if (ec) {
    std::error_code restore;
    if (had_old) fs::rename(old, to, restore);
    throw CheckpointError(fmt::format("cannot rename {} to {} ({})", from, to, ec.message()));
  }
  const fs::path parent = fs::path(to).parent_path();
  sync_path(parent.empty() ? std::string(".") : parent.string());
  if (had_old) fs::remove_all(old, ec);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  Fd fd(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    throw CheckpointError(fmt::format("{}: cannot open ({})", path, os_error()));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) return;
  data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw CheckpointError(fmt::format("{}: cannot map {} bytes ({})", path, size_, os_error()));
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

std::string file_sha256(const std::string& path) {
  MappedFile file(path);
  return data::sha256_hex(file.bytes());
}

}  // namespace titan::components::checkpoint
