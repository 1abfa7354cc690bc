#include "titan/platform/memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <unistd.h>

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

// Delegates to LibTorch's CPU allocator and counts the bytes of each live allocation.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t nbytes) const override {
    auto* record = new Record{base_->allocate(nbytes), static_cast<int64_t>(nbytes)};
    add_live(record->bytes);
    void* data = record->inner.get();
    return {data, record, &release, record->inner.device()};
  }

 private:
  struct Record {
    c10::DataPtr inner;
    int64_t bytes;
  };

  static void release(void* ctx) {
    auto* record = static_cast<Record*>(ctx);
    add_live(-record->bytes);
    delete record;
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

int64_t total_memory_bytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
}

}  // namespace titan::platform
