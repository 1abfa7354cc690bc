#include "titan/platform/allocation_cache.h"

#include <bit>

namespace titan::platform {

size_t AllocationCache::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kClassesFrom = 4096;
  if (bytes <= kClassesFrom) return (bytes + kSmall - 1) / kSmall * kSmall;
  const size_t step = std::bit_floor(bytes - 1) / 8;  // an eighth of the power of two below
  return (bytes + step - 1) / step * step;
}

void* AllocationCache::take(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = free_.find(capacity);
  if (it == free_.end() || it->second.empty()) return nullptr;
  void* block = it->second.back().ptr;
  it->second.pop_back();
  cached_bytes_ -= static_cast<int64_t>(capacity);
  return block;
}

void AllocationCache::give(void* block, size_t capacity, Free free) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_[capacity].push_back({block, free});
  cached_bytes_ += static_cast<int64_t>(capacity);
}

void AllocationCache::release() {
  std::unordered_map<size_t, std::vector<Block>> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    cached_bytes_ = 0;
  }
  for (auto& [capacity, list] : blocks) {
    for (const auto& b : list) b.free(b.ptr);
  }
}

int64_t AllocationCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

}  // namespace titan::platform
