#include "titan/components/data/token_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "titan/components/data/documents.h"
#include "titan/components/data/sha256.h"
#include "titan/errors.h"
#include "titan/platform/env.h"
#include "titan/platform/progress.h"

namespace titan::components::data {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

// Bump when the .tokens layout or the document framing changes: old caches then go unused.
constexpr int kFormatVersion = 1;
constexpr const char* kFormatName = "titan-token-cache";

struct FileStamp {
  fs::path path;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
};

FileStamp stamp(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw DataError(fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
  }
  return {path, static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

json optional_id(std::optional<int32_t> id) { return id ? json(*id) : json(nullptr); }

// Everything the tokens depend on; its hash names the cache.
json cache_key(const std::vector<FileStamp>& stamps, const Tokenizer& tokenizer) {
  json files = json::array();
  for (const FileStamp& s : stamps) files.push_back({s.path.string(), s.bytes, s.mtime_ns});
  return {{"version", kFormatVersion},
          {"files", files},
          {"tokenizer", tokenizer.describe()},
          {"vocab_size", tokenizer.vocab_size()},
          {"bos_id", optional_id(tokenizer.bos_id())},
          {"eos_id", optional_id(tokenizer.eos_id())}};
}

// A label safe in a file name.
std::string file_label(const std::string& label) {
  std::string out = label.empty() ? "dataset" : label;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

// A name beside `final_path` no other process or thread uses.
fs::path temp_name(const fs::path& final_path) {
  static std::atomic<int64_t> counter{0};
  char host[256] = "host";
  ::gethostname(host, sizeof(host) - 1);
  return fs::path(fmt::format("{}.tmp.{}.{}.{}", final_path.string(), host, ::getpid(),
                              counter.fetch_add(1)));
}

// Removes a temporary file unless it was renamed into place.
class TempFile {
 public:
  explicit TempFile(fs::path path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const fs::path& path() const { return path_; }

  void rename_to(const fs::path& final_path) {
    std::error_code ec;
    fs::rename(path_, final_path, ec);
    if (ec) {
      throw DataError(fmt::format("cannot rename {} to {}: {}", path_.string(),
                                  final_path.string(), ec.message()));
    }
    path_.clear();
  }

 private:
  fs::path path_;
};

// Appends ids to a file through a fixed buffer, then flushes and syncs it.
class TokenWriter {
 public:
  explicit TokenWriter(const fs::path& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (file_ == nullptr) fail("cannot create");
    buffer_.reserve(kBufferTokens);
  }
  ~TokenWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  void push(int32_t id) {
    buffer_.push_back(id);
    if (buffer_.size() == kBufferTokens) flush();
  }
  int64_t count() const { return written_ + static_cast<int64_t>(buffer_.size()); }

  void finish() {
    flush();
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail("cannot write");
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) fail("cannot close");
  }

 private:
  static constexpr size_t kBufferTokens = size_t{1} << 20;

  void flush() {
    if (buffer_.empty()) return;
    if (std::fwrite(buffer_.data(), sizeof(int32_t), buffer_.size(), file_) != buffer_.size()) {
      fail("cannot write");
    }
    written_ += static_cast<int64_t>(buffer_.size());
    buffer_.clear();
  }
  [[noreturn]] void fail(const char* what) {
    throw DataError(fmt::format("{}: {}: {}", path_.string(), what, std::strerror(errno)));
  }

  fs::path path_;
  std::FILE* file_;
  std::vector<int32_t> buffer_;
  int64_t written_ = 0;
};

void write_json(const fs::path& final_path, const json& value) {
  TempFile tmp(temp_name(final_path));
  {
    std::ofstream out(tmp.path());
    out << value.dump(2) << "\n";
    out.close();
    if (!out) throw DataError(fmt::format("{}: cannot write", tmp.path().string()));
  }
  tmp.rename_to(final_path);
}

std::optional<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

struct CachePaths {
  fs::path tokens;
  fs::path meta;
};

// Tokenizes every document of `stamps` into `paths`; returns the seconds it took.
double build(const std::vector<FileStamp>& stamps, const json& key, const Tokenizer& tokenizer,
           bool skip_bad, const CachePaths& paths) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t vocab = tokenizer.vocab_size();
  const std::optional<int32_t> bos = tokenizer.bos_id();
  const std::optional<int32_t> eos = tokenizer.eos_id();
  const auto check_id = [&](int32_t id, const fs::path& file, int64_t line) {
    if (id < 0 || id >= vocab) {
      throw DataError(fmt::format("{}:{}: tokenizer {} gave id {} outside [0, {})",
                                  file.string(), line, tokenizer.describe(), id, vocab));
    }
  };

  for (const auto& [what, id] : {std::pair{"BOS", bos}, std::pair{"EOS", eos}}) {
    if (id && (*id < 0 || *id >= vocab)) {
      throw DataError(fmt::format("tokenizer {}: {} id {} outside [0, {})", tokenizer.describe(),
                                  what, *id, vocab));
    }
  }

  TempFile tmp(temp_name(paths.tokens));
  TokenWriter writer(tmp.path());
  DocumentStats doc_stats;
  json files = json::array();
  double total_mb = 0, text_mb = 0;
  for (const FileStamp& s : stamps) total_mb += static_cast<double>(s.bytes) / 1e6;
  platform::Progress progress(fmt::format("tokenizing {} file(s) into the token cache",
                                          stamps.size()),
                              total_mb, "MB of text");
  for (const FileStamp& s : stamps) {
    const MappedFile map(s.path);
    const DocumentFormat format = document_format(s.path);
    for_each_document(map.bytes(), s.path, format, skip_bad, doc_stats,
                      [&](std::string_view text, int64_t line) {
                        text_mb += static_cast<double>(text.size()) / 1e6;
                        progress.update(text_mb);
                        if (bos) writer.push(*bos);
                        std::vector<int32_t> ids;
                        try {
                          ids = tokenizer.encode(text);
                        } catch (const std::exception& e) {
                          throw DataError(fmt::format("{}:{}: tokenizer {} failed: {}",
                                                      s.path.string(), line,
                                                      tokenizer.describe(), e.what()));
                        }
                        for (int32_t id : ids) {
                          check_id(id, s.path, line);
                          writer.push(id);
                        }
                        if (eos) writer.push(*eos);
                      });
    files.push_back({{"path", s.path.string()},
                     {"bytes", static_cast<int64_t>(map.size())},
                     {"mtime_ns", s.mtime_ns},
                     {"sha256", sha256_hex(map.bytes())}});
  }
  if (doc_stats.documents == 0) {
    throw DataError(fmt::format(
        "{}: no documents to train on ({} bad ones skipped{}{})", stamps.front().path.string(),
        doc_stats.skipped, doc_stats.skipped_examples.empty() ? "" : "; first: ",
        doc_stats.skipped_examples.empty() ? "" : doc_stats.skipped_examples.front()));
  }
  const int64_t num_tokens = writer.count();
  writer.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  json meta = {{"format", kFormatName},
               {"key", key},
               {"files", files},
               {"documents", doc_stats.documents},
               {"skipped", doc_stats.skipped},
               {"skipped_examples", doc_stats.skipped_examples},
               {"tokens", num_tokens},
               {"dtype", "int32"},
               {"build_seconds", seconds}};
  write_json(paths.meta, meta);  // first: a visible .tokens implies its .json
  tmp.rename_to(paths.tokens);
  return seconds;
}

struct Loaded {
  DataStats stats;
  std::vector<DatasetFile> files;
  MappedFile map;
};

// The complete cache at `paths` for `key`, or nullopt when it is missing or incomplete.
std::optional<Loaded> try_load(const CachePaths& paths, const json& key) {
  std::error_code ec;
  if (!fs::is_regular_file(paths.tokens, ec)) return std::nullopt;
  std::optional<json> meta = read_json(paths.meta);
  if (!meta || !meta->is_object() || meta->value("format", "") != kFormatName ||
      meta->value("key", json()) != key) {
    return std::nullopt;
  }
  Loaded loaded;
  try {
    loaded.stats.documents = meta->at("documents").get<int64_t>();
    loaded.stats.skipped = meta->at("skipped").get<int64_t>();
    loaded.stats.skipped_examples = meta->at("skipped_examples").get<std::vector<std::string>>();
    loaded.stats.tokens = meta->at("tokens").get<int64_t>();
    for (const json& f : meta->at("files")) {
      loaded.files.push_back({f.at("path").get<std::string>(), f.at("bytes").get<int64_t>(),
                              f.at("sha256").get<std::string>()});
    }
  } catch (const json::exception&) {
    return std::nullopt;
  }
  loaded.stats.cache_path = paths.tokens.string();
  loaded.map = MappedFile(paths.tokens);
  if (static_cast<int64_t>(loaded.map.size()) !=
      loaded.stats.tokens * static_cast<int64_t>(sizeof(int32_t))) {
    return std::nullopt;
  }
  return loaded;
}

}  // namespace

fs::path default_token_cache_dir() {
  return platform::titan_cache_dir("TITAN_CACHE_DIR", "tokens");
}

TokenCache::TokenCache(const DatasetSource& source, const Tokenizer& tokenizer,
                       const TokenCacheOptions& options) {
  std::vector<FileStamp> stamps;
  for (const fs::path& file : source.files) stamps.push_back(stamp(file));
  const json key = cache_key(stamps, tokenizer);
  const fs::path dir = options.cache_dir.empty() ? default_token_cache_dir() : options.cache_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw DataError(fmt::format("token cache folder {}: {} (TITAN_CACHE_DIR selects another)",
                                dir.string(), ec.message()));
  }
  const std::string stem =
      fmt::format("{}-{}", file_label(source.label), sha256_hex(key.dump()).substr(0, 16));
  const CachePaths paths{dir / (stem + ".tokens"), dir / (stem + ".json")};

  std::optional<Loaded> loaded = try_load(paths, key);
  double build_seconds = -1.0;
  if (!loaded && options.build) {
    build_seconds = build(stamps, key, tokenizer, options.skip_bad, paths);
    loaded = try_load(paths, key);
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options.wait_timeout_s);
  while (!loaded) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw DataError(fmt::format(
          "token cache {} did not appear within {} s; the process that builds it (local rank 0) "
          "may have failed",
          paths.tokens.string(), options.wait_timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    loaded = try_load(paths, key);
  }

  stats_ = std::move(loaded->stats);
  stats_.built = build_seconds >= 0.0;
  stats_.build_seconds = std::max(build_seconds, 0.0);
  if (stats_.skipped > 0 && !options.skip_bad) {
    throw DataError(fmt::format(
        "{} bad documents in dataset '{}' (first: {}); the token cache {} skipped them, "
        "but training.skip_bad_documents is off: fix the data or turn it on",
        stats_.skipped, source.label, stats_.skipped_examples.front(), stats_.cache_path));
  }
  files_ = std::move(loaded->files);
  map_ = std::move(loaded->map);
}

}  // namespace titan::components::data
