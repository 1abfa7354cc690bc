#include "titan/platform/memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#ifdef TITAN_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "titan/errors.h"
#include "titan/platform/allocation_cache.h"

namespace titan::platform {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::array<std::atomic<int64_t>, kMemoryCategories> g_by_category{};
std::atomic<uint64_t> g_next_id{1};
std::atomic<int64_t> g_system_allocations{0};
std::atomic<int64_t> g_alloc_retries{0};
std::atomic<AllocationCache*> g_cache{nullptr};  // compile mode's planned buffers, or none
int64_t g_system_allocations_at_reset = 0;       // the device's count at the last reset
std::atomic<MemoryObserver*> g_observer{nullptr};
std::mutex g_observer_mutex;
std::mutex g_failure_mutex;
std::optional<AllocationFailure> g_failure;
int64_t g_limit = 0;  // TITAN_TEST_MEMORY_LIMIT_BYTES, 0: none
thread_local MemoryTag t_tag;

void add_live(int64_t delta, MemoryCategory c) {
  g_by_category[index_of(c)].fetch_add(delta);
  int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

template <typename Call>
void tell_observer(Call&& call) {
  if (!g_observer.load()) return;
  std::lock_guard<std::mutex> lock(g_observer_mutex);
  if (auto* observer = g_observer.load()) call(*observer);
}

CategoryBytes category_snapshot() {
  CategoryBytes out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = g_by_category[i].load();
  return out;
}

[[noreturn]] void refuse(size_t nbytes, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(g_failure_mutex);
    g_failure = AllocationFailure{static_cast<int64_t>(nbytes), category_snapshot()};
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU allocation of ", nbytes, " bytes failed with ",
                   g_live.load(), " bytes of tensors alive: ", why);
}

// Delegates to LibTorch's CPU allocator and counts the bytes of each live allocation under
// the thread's tag. The size, tag and id live in a 64-byte header in front of the data
// (keeping the allocator's 64-byte alignment), so that the data pointer is also the deleter's
// context, as raw_allocate() (oneDNN's bf16 GEMMs) requires. With the allocation cache on,
// blocks are taken from it and given back to it by size class.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (g_limit > 0 && g_live.load() + static_cast<int64_t>(nbytes) > g_limit) {
      refuse(nbytes, fmt::format("over TITAN_TEST_MEMORY_LIMIT_BYTES = {}", g_limit));
    }
    auto* cache = g_cache.load();
    const size_t capacity = (cache ? AllocationCache::size_class(nbytes) : nbytes) + kHeader;
    auto* header = static_cast<Header*>(cache ? cache->take(capacity) : nullptr);
    if (!header) {
      c10::DataPtr inner = from_system(capacity, nbytes);
      if (!inner) return base_->allocate(nbytes);
      header = static_cast<Header*>(inner.release_context());
      header->base_free = base_->raw_deleter();
    }
    header->bytes = static_cast<int64_t>(nbytes);
    header->capacity = capacity;
    header->id = g_next_id.fetch_add(1);
    header->tag = t_tag;
    add_live(header->bytes, header->tag.category);
    tell_observer([&](MemoryObserver& o) { o.allocated(header->id, header->bytes, header->tag); });
    void* data = reinterpret_cast<char*>(header) + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

  /// Moves the allocation behind `data` (one of ours) to `category`.
  static void retag(void* data, MemoryCategory category) {
    auto* header = header_of(data);
    const MemoryCategory from = header->tag.category;
    if (from == category) return;
    header->tag = {category, -1};
    g_by_category[index_of(from)].fetch_sub(header->bytes);
    g_by_category[index_of(category)].fetch_add(header->bytes);
    tell_observer(
        [&](MemoryObserver& o) { o.retagged(header->id, header->bytes, from, category); });
  }

  static void release(void* data) {
    auto* header = header_of(data);
    add_live(-header->bytes, header->tag.category);
    tell_observer([&](MemoryObserver& o) { o.freed(header->id, header->bytes, header->tag); });
    auto* cache = g_cache.load();
    const size_t planned = AllocationCache::size_class(header->bytes) + kHeader;
    if (cache && header->capacity == planned) {
      cache->give(header, header->capacity, header->base_free);
    } else {
      header->base_free(header);
    }
  }

 private:
  // `capacity` bytes from LibTorch's allocator, null when its blocks cannot carry our header
  // (no raw deleter, or data and context apart). The system refusing is retried once with the
  // cache emptied, then refused with what was alive.
  c10::DataPtr from_system(size_t capacity, size_t nbytes) {
    if (!base_->raw_deleter()) return {};
    c10::DataPtr inner;
    try {
      inner = base_->allocate(capacity);
    } catch (const c10::Error& e) {
      auto* cache = g_cache.load();
      if (!cache || cache->cached_bytes() == 0) refuse(nbytes, e.what_without_backtrace());
      cache->release();
      g_alloc_retries.fetch_add(1);
      try {
        inner = base_->allocate(capacity);
      } catch (const c10::Error& again) {
        refuse(nbytes, again.what_without_backtrace());
      }
    }
    g_system_allocations.fetch_add(1);
    if (inner.get() != inner.get_context()) return {};
    return inner;
  }

  static constexpr size_t kHeader = 64;
  struct Header {
    int64_t bytes;     // the tensor's
    size_t capacity;   // the block's, header included
    c10::DeleterFnPtr base_free;
    uint64_t id;
    MemoryTag tag;
  };
  static_assert(sizeof(Header) <= kHeader);

  static Header* header_of(void* data) {
    return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeader);
  }

  c10::Allocator* base_;
};

}  // namespace

const char* memory_category_name(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::Other: return "other";
    case MemoryCategory::Parameters: return "parameters";
    case MemoryCategory::Gradients: return "gradients";
    case MemoryCategory::OptimizerState: return "optimizer_state";
    case MemoryCategory::Activations: return "activations";
    case MemoryCategory::ActivationGradients: return "activation_gradients";
    case MemoryCategory::Communication: return "communication";
    case MemoryCategory::Loss: return "loss";
  }
  return "other";
}

MemoryTag current_memory_tag() { return t_tag; }
void set_memory_tag(MemoryTag tag) { t_tag = tag; }

void enable_memory_counting() {
  static CountingAllocator* counting = [] {
    if (const char* limit = std::getenv("TITAN_TEST_MEMORY_LIMIT_BYTES")) {
      char* end = nullptr;
      g_limit = std::strtoll(limit, &end, 10);
      if (*end != '\0' || g_limit <= 0) {
        throw ConfigError(fmt::format(
            "TITAN_TEST_MEMORY_LIMIT_BYTES='{}' must be a positive number of bytes", limit));
      }
    }
    auto* a = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetAllocator(c10::DeviceType::CPU, a, /*priority=*/1);
    return a;
  }();
  (void)counting;
}

void retag_memory(const torch::Tensor& t, MemoryCategory category) {
  if (!t.defined() || !t.has_storage()) return;
  const auto& data = t.storage().data_ptr();
  if (data.get_deleter() != &CountingAllocator::release || !data.get()) return;
  CountingAllocator::retag(data.get(), category);
}

CategoryBytes live_bytes_by_category() { return category_snapshot(); }

void set_memory_observer(MemoryObserver* observer) {
  std::lock_guard<std::mutex> lock(g_observer_mutex);
  g_observer.store(observer);
}

std::optional<AllocationFailure> last_allocation_failure() {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  return g_failure;
}

int64_t live_tensor_bytes() { return g_live.load(); }
int64_t peak_tensor_bytes() { return g_peak.load(); }
void reset_peak_tensor_bytes() { g_peak.store(g_live.load()); }

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

MemoryPeaks memory_peaks(const torch::Device& device) {
#ifdef TITAN_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {stats.active_bytes[kAll].peak, stats.reserved_bytes[kAll].peak,
            stats.num_alloc_retries, stats.num_ooms,
            stats.num_device_alloc - g_system_allocations_at_reset};
  }
#endif
  return {peak_tensor_bytes(), peak_rss_bytes(), g_alloc_retries.load(), 0,
          g_system_allocations.load() - g_system_allocations_at_reset};
}

void reset_memory_peaks(const torch::Device& device) {
#ifdef TITAN_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    g_system_allocations_at_reset =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).num_device_alloc;
    return;
  }
#endif
  reset_peak_tensor_bytes();
  g_system_allocations_at_reset = g_system_allocations.load();
}

void enable_allocation_cache() {
  // Never destroyed: tensors freed during exit still give their blocks to it.
  static auto* cache = new AllocationCache;
  enable_memory_counting();
  g_cache.store(cache);
}

void release_cached_memory() {
  if (auto* cache = g_cache.load()) cache->release();
}

int64_t cached_memory_bytes() {
  auto* cache = g_cache.load();
  return cache ? cache->cached_bytes() : 0;
}

}  // namespace titan::platform
