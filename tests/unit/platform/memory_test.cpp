// The counting allocator's categories (platform/memory.h): allocations count under their
// thread's tag, retag_memory moves a tensor's bytes, an observer sees every event with the
// bytes and tags the counters use, and a refused allocation is an OutOfMemoryError that
// records what was alive.
#include "titan/platform/memory.h"

#include <gtest/gtest.h>

#include <vector>

namespace titan::platform {
namespace unit_platform_memory_test {

int64_t live(MemoryCategory c) { return live_bytes_by_category()[index_of(c)]; }

constexpr int64_t kMiB = 1 << 20;

TEST(MemoryCategories, AllocationsCountUnderTheThreadsTagUntilFreed) {
  enable_memory_counting();
  const int64_t acts = live(MemoryCategory::Activations);
  const int64_t comm = live(MemoryCategory::Communication);
  torch::Tensor a, c;
  {
    MemoryScope scope(MemoryCategory::Activations, 3);
    EXPECT_EQ(current_memory_tag().block, 3);
    a = torch::empty({kMiB / 4});  // 1 MiB of float32
    {
      MemoryScope inner(MemoryCategory::Communication);
      c = torch::empty({kMiB / 2});  // 2 MiB
    }
    EXPECT_EQ(current_memory_tag().category, MemoryCategory::Activations);
  }
  EXPECT_EQ(current_memory_tag().category, MemoryCategory::Other);
  EXPECT_EQ(live(MemoryCategory::Activations) - acts, kMiB);
  EXPECT_EQ(live(MemoryCategory::Communication) - comm, 2 * kMiB);
  a = torch::Tensor();
  EXPECT_EQ(live(MemoryCategory::Activations), acts);
  retag_memory(c, MemoryCategory::Gradients);  // moved, and freed from its new category
  EXPECT_EQ(live(MemoryCategory::Communication), comm);
  const int64_t grads = live(MemoryCategory::Gradients);
  c = torch::Tensor();
  EXPECT_EQ(grads - live(MemoryCategory::Gradients), 2 * kMiB);
  const auto before = live_bytes_by_category();
  retag_memory(torch::Tensor(), MemoryCategory::Loss);  // no-ops
  std::vector<float> outside(16);
  retag_memory(torch::from_blob(outside.data(), {16}), MemoryCategory::Loss);
  EXPECT_EQ(live_bytes_by_category(), before);
}

struct Log : MemoryObserver {
  struct Event {
    char kind;
    uint64_t id;
    int64_t bytes;
    MemoryCategory category;
  };
  std::vector<Event> events;
  void allocated(uint64_t id, int64_t bytes, MemoryTag tag) override {
    events.push_back({'a', id, bytes, tag.category});
  }
  void freed(uint64_t id, int64_t bytes, MemoryTag tag) override {
    events.push_back({'f', id, bytes, tag.category});
  }
  void retagged(uint64_t id, int64_t bytes, MemoryCategory, MemoryCategory to) override {
    events.push_back({'r', id, bytes, to});
  }
};

TEST(MemoryCategories, AnObserverSeesEachAllocationRetagAndFreeByItsId) {
  enable_memory_counting();
  Log log;
  set_memory_observer(&log);
  {
    MemoryScope scope(MemoryCategory::Loss);
    auto t = torch::empty({1000}, torch::kFloat64);
    retag_memory(t, MemoryCategory::OptimizerState);
  }
  set_memory_observer(nullptr);
  auto untracked = torch::empty({10});
  ASSERT_EQ(log.events.size(), 3u);
  EXPECT_EQ(log.events[0].kind, 'a');
  EXPECT_EQ(log.events[0].bytes, 8000);
  EXPECT_EQ(log.events[0].category, MemoryCategory::Loss);
  EXPECT_EQ(log.events[1].kind, 'r');
  EXPECT_EQ(log.events[1].category, MemoryCategory::OptimizerState);
  EXPECT_EQ(log.events[2].kind, 'f');
  EXPECT_EQ(log.events[2].category, MemoryCategory::OptimizerState);
  for (const auto& e : log.events) EXPECT_EQ(e.id, log.events[0].id);
}

TEST(MemoryCategories, ARefusedAllocationIsOutOfMemoryAndRecordsWhatWasAlive) {
  enable_memory_counting();
  MemoryScope scope(MemoryCategory::Activations);
  auto held = torch::empty({kMiB / 4});
  const int64_t before = live_tensor_bytes();
  EXPECT_THROW(torch::empty({int64_t{1} << 50}, torch::kUInt8), c10::OutOfMemoryError);
  EXPECT_EQ(live_tensor_bytes(), before);
  const auto failure = last_allocation_failure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->requested, int64_t{1} << 50);
  EXPECT_GE(failure->live[index_of(MemoryCategory::Activations)], kMiB);
}

}  // namespace unit_platform_memory_test
}  // namespace titan::platform
