// Helpers shared by the data tests: a byte-level test tokenizer that counts its encode calls,
// a temporary folder, file writing and a scoped environment variable.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::data::testing_support {

/// Ids 0..255 are bytes; BOS 256 and EOS 257 when enabled; vocab 258 (or `vocab_size`).
class CountingByteTokenizer : public Tokenizer {
 public:
  explicit CountingByteTokenizer(bool with_bos = true, bool with_eos = true,
                                 std::string name = "test-bytes", int64_t vocab_size = 258)
      : with_bos_(with_bos), with_eos_(with_eos), name_(std::move(name)), vocab_(vocab_size) {}

  std::vector<int32_t> encode(std::string_view text) const override {
    ++encode_calls;
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 256) out.push_back(static_cast<char>(id));
    }
    return out;
  }
  int64_t vocab_size() const override { return vocab_; }
  std::optional<int32_t> bos_id() const override {
    return with_bos_ ? std::optional<int32_t>(256) : std::nullopt;
  }
  std::optional<int32_t> eos_id() const override {
    return with_eos_ ? std::optional<int32_t>(257) : std::nullopt;
  }
  std::string describe() const override { return name_; }

  mutable std::atomic<int64_t> encode_calls{0};

 private:
  bool with_bos_;
  bool with_eos_;
  std::string name_;
  int64_t vocab_;
};

/// A fresh folder under the test temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "titan_data_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Writes `content` to `path` (creating parent folders), replacing the file.
inline void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Sets (or with nullopt unsets) an environment variable, restoring it at scope exit.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  std::string name_;
  std::optional<std::string> old_;
};

/// The message of the exception of type E that `fn` throws; fails the test when none is thrown.
template <typename E, typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace titan::components::data::testing_support
