#include "titan/components/tokenizer/word_cache.h"

#include <functional>

namespace titan::components::tokenizer {

WordCache::WordCache(size_t capacity) : shard_capacity_(capacity / kShards + 1) {}

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  const size_t hash = std::hash<std::string_view>{}(word);
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.entries.find(hash);
  if (it == shard.entries.end() || it->second.word != word) return false;
  out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
  return true;
}

void WordCache::insert(std::string_view word, const int32_t* first, const int32_t* last) const {
  const size_t hash = std::hash<std::string_view>{}(word);
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.entries.size() >= shard_capacity_) shard.entries.clear();
  Entry& entry = shard.entries[hash];  // a colliding word is replaced
  entry.word.assign(word);
  entry.ids.assign(first, last);
}

}  // namespace titan::components::tokenizer
