// Compile mode's planned buffers (platform/allocation_cache.h through platform/memory.h): the
// size classes bound the waste; with the cache on, a second pass over the same shapes takes
// nothing from the system and reuses the first pass's blocks, while live and peak bytes still
// count the tensors' own sizes; releasing the cache makes the next pass allocate again.
#include "titan/platform/allocation_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "titan/platform/memory.h"

namespace titan::platform {
namespace unit_platform_allocation_cache_test {

TEST(AllocationCache, SizeClassesCoverTheRequestWithinAnEighth) {
  for (size_t bytes : {size_t(1), size_t(511), size_t(4096), size_t(4097), size_t(1) << 20,
                       (size_t(1) << 20) + 1, size_t(12345678)}) {
    const size_t c = AllocationCache::size_class(bytes);
    EXPECT_GE(c, bytes);
    if (bytes > 4096) {
      EXPECT_LE(double(c), 1.125 * double(bytes)) << bytes;
    }
    EXPECT_EQ(AllocationCache::size_class(c), c) << "a class is its own class: " << bytes;
  }
  EXPECT_EQ(AllocationCache::size_class(size_t(1) << 20), size_t(1) << 20);
}

// One "step": tensors of several shapes alive together, then freed; the data pointers of the
// ones made directly (a matmul's temporaries share a class with its result).
std::set<const void*> step() {
  std::vector<torch::Tensor> alive;
  std::set<const void*> data;
  for (int64_t n : {3, 1000, 1000, 70000, 250000, 1 << 20}) {
    alive.push_back(torch::empty({n}));
    data.insert(alive.back().data_ptr());
  }
  alive.push_back(torch::randn({64, 64}).matmul(torch::randn({64, 64})));
  return data;
}

TEST(AllocationCache, TheSecondStepTakesNothingFromTheSystem) {
  const torch::Device cpu(torch::kCPU);
  enable_allocation_cache();
  reset_memory_peaks(cpu);
  const int64_t live_before = live_tensor_bytes();
  const auto first = step();
  EXPECT_GT(memory_peaks(cpu).system_allocs, 0);
  EXPECT_EQ(live_tensor_bytes(), live_before);
  EXPECT_GT(cached_memory_bytes(), 4 << 20);

  reset_memory_peaks(cpu);
  const auto second = step();
  const auto peaks = memory_peaks(cpu);
  EXPECT_EQ(peaks.system_allocs, 0);
  EXPECT_EQ(second, first) << "the same blocks, reused";
  // The peak counts what the tensors asked for (4 MiB + about 1.3 MiB), not the classes.
  EXPECT_LT(peaks.max_active - live_before, 6 << 20);
  EXPECT_GT(peaks.max_active - live_before, 5 << 20);

  release_cached_memory();
  EXPECT_EQ(cached_memory_bytes(), 0);
  reset_memory_peaks(cpu);
  step();
  EXPECT_GT(memory_peaks(cpu).system_allocs, 0);
}

}  // namespace unit_platform_allocation_cache_test
}  // namespace titan::platform
