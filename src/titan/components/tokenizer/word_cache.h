// A thread-safe memo of BPE results per pre-token word ("ing", " the" -> ids), so that frequent
// words are merged once. Sharded by hash, each shard behind its own mutex; a full shard is
// emptied and refilled, which keeps the cache tracking the current text.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace titan::components::tokenizer {

class WordCache {
 public:
  /// `capacity`: words held at most (over all shards).
  explicit WordCache(size_t capacity);

  /// Appends the cached ids of `word` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;

  /// Remembers that `word` encodes to ids [first, last).
  void insert(std::string_view word, const int32_t* first, const int32_t* last) const;

 private:
  struct Entry {
    std::string word;
    std::vector<int32_t> ids;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<size_t, Entry> entries;  // keyed by the word's hash
  };
  static constexpr size_t kShards = 16;

  size_t shard_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace titan::components::tokenizer
