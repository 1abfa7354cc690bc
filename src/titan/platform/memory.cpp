#include "titan/platform/memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#ifdef TITAN_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <atomic>
#include <fstream>
#include <string>

namespace titan::platform {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void add_live(int64_t delta) {
  int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

// Delegates to LibTorch's CPU allocator and counts the bytes of each live allocation. The
// size lives in a 64-byte header in front of the data (keeping the allocator's 64-byte
// alignment), so that the data pointer is also the deleter's context, as raw_allocate()
// (oneDNN's bf16 GEMMs) requires.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeleterFnPtr base_free = base_->raw_deleter();
    c10::DataPtr inner = base_->allocate(nbytes + kHeader);
    if (!base_free || inner.get() != inner.get_context()) return base_->allocate(nbytes);
    c10::Device device = inner.device();
    auto* header = static_cast<Header*>(inner.release_context());
    header->bytes = static_cast<int64_t>(nbytes);
    header->base_free = base_free;
    add_live(header->bytes);
    void* data = reinterpret_cast<char*>(header) + kHeader;
    return {data, data, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  static constexpr size_t kHeader = 64;
  struct Header {
    int64_t bytes;
    c10::DeleterFnPtr base_free;
  };

  static void release(void* data) {
    auto* header = reinterpret_cast<Header*>(static_cast<char*>(data) - kHeader);
    add_live(-header->bytes);
    header->base_free(header);
  }

  c10::Allocator* base_;
};

}  // namespace

void enable_memory_counting() {
  static CountingAllocator* counting = [] {
    auto* a = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetAllocator(c10::DeviceType::CPU, a, /*priority=*/1);
    return a;
  }();
  (void)counting;
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
            stats.num_alloc_retries, stats.num_ooms};
  }
#endif
  return {peak_tensor_bytes(), peak_rss_bytes(), 0, 0};
}

void reset_memory_peaks(const torch::Device& device) {
#ifdef TITAN_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
#endif
  reset_peak_tensor_bytes();
}

}  // namespace titan::platform
