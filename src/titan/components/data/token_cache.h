// The token cache (Megatron-LM's way): every document of a dataset tokenized once, as
// [BOS] text-tokens [EOS] (BOS/EOS where the tokenizer has them), concatenated into one flat
// file of native (little-endian) int32 ids, then memory-mapped read-only by every run after.
//
// Files, in the cache folder (TokenCacheOptions::cache_dir, default default_token_cache_dir()):
//   <label>-<key>.tokens  the ids, 4 bytes each, nothing else
//   <label>-<key>.json    what was read: files (path, bytes, mtime, sha256), tokenizer,
//                         document / skipped counts, token count
// <key> is the first 16 hex digits of the SHA-256 of (format version; each file's canonical
// path, size and mtime in ns; tokenizer.describe(), vocab size, BOS and EOS ids), so a changed
// file or another tokenizer gets a new cache, and an unchanged dataset is not re-read, not even
// to hash it (the file hashes come from the .json). Caches of older versions of a dataset stay
// in the folder until deleted by hand.
//
// Concurrency: both files are written under temporary names and renamed into place, .json
// first, so a reader that sees the .tokens file sees a complete cache. Ranks with `build`
// (local rank 0 of each node) build a missing cache; the others wait for it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "titan/components/data/dataset.h"
#include "titan/components/data/mapped_file.h"
#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::data {

/// One dataset file as the run manifest records it.
struct DatasetFile {
  std::string path;    // absolute, canonical
  int64_t bytes = 0;   // size in bytes
  std::string sha256;  // lower-case hex
};

/// What the data pipeline read; the trainer logs it.
struct DataStats {
  int64_t documents = 0;  // documents tokenized
  int64_t skipped = 0;    // bad documents (and empty files) skipped (training.skip_bad_documents)
  std::vector<std::string> skipped_examples;  // the first few reasons, "file:line: what"
  int64_t tokens = 0;     // ids in the cache, BOS/EOS included
  std::string cache_path;      // the .tokens file
  bool built = false;          // true when this process tokenized; false when it reused a cache
  double build_seconds = 0.0;  // tokenizing time when built here
};

struct TokenCacheOptions {
  /// Cache folder; empty means default_token_cache_dir(). Created when missing.
  std::filesystem::path cache_dir;
  /// Skip bad documents instead of throwing (training.skip_bad_documents).
  bool skip_bad = false;
  /// Build the cache when it is missing; false waits for another process to build it.
  bool build = true;
  /// How long a non-building process waits for the cache, in seconds.
  double wait_timeout_s = 3600.0;
};

/// $TITAN_CACHE_DIR, else $HOME/.cache/titan/tokens.
std::filesystem::path default_token_cache_dir();

/// A dataset's tokens, memory-mapped. Immutable, thread-safe to read.
class TokenCache {
 public:
  /// Opens the cache of `source` under `tokenizer`, building it first when missing (and
  /// options.build), else waiting for it up to options.wait_timeout_s.
  /// Throws DataError: a bad document (unless options.skip_bad; "file:line: what"), no
  /// documents left, a token id outside [0, vocab_size), an unusable cache folder, a cache built
  /// with skipping reused while options.skip_bad is false, or a wait that timed out.
  TokenCache(const DatasetSource& source, const Tokenizer& tokenizer,
             const TokenCacheOptions& options);

  /// The ids, num_tokens() of them, valid while this object lives.
  const int32_t* tokens() const { return reinterpret_cast<const int32_t*>(map_.bytes().data()); }
  int64_t num_tokens() const { return stats_.tokens; }
  const std::vector<DatasetFile>& files() const { return files_; }
  const DataStats& stats() const { return stats_; }

 private:
  std::vector<DatasetFile> files_;
  DataStats stats_;
  MappedFile map_;
};

}  // namespace titan::components::data
