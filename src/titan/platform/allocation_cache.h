// Compile mode's planned buffers on the CPU: storage a freed tensor leaves is kept, by size
// class, for the next allocation of that class, so that once one step has run with the run's
// shapes, the next ones take every buffer from the cache and none from the system (on a GPU,
// CUDA's caching allocator does this for eager and compile mode alike). Size classes are eight
// per power of two from 4 KiB (at most 12.5% over the request) and exact 512-byte multiples
// below. The cache only grows; release() hands it all back (after checkpoint saves and
// validation, whose buffers the training steps do not reuse, and before a retry when the
// system refuses memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace titan::platform {

class AllocationCache {
 public:
  using Free = void (*)(void*);

  /// The block size an allocation of `bytes` takes (>= bytes).
  static size_t size_class(size_t bytes);

  /// A cached block of exactly `capacity` bytes (a size_class), or nullptr.
  void* take(size_t capacity);
  /// Keeps `block` of `capacity` bytes for a later take(); `free` returns it to the system.
  void give(void* block, size_t capacity, Free free);
  /// Returns every cached block to the system.
  void release();
  /// Bytes held in the cache now.
  int64_t cached_bytes() const;

 private:
  struct Block {
    void* ptr;
    Free free;
  };
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<Block>> free_;  // by capacity
  int64_t cached_bytes_ = 0;
};

}  // namespace titan::platform
