// A step's memory replayed from allocator events (tools/memory_timeline.h) against totals
// worked out by hand: the peak and its breakdown, retags counted from the allocation (or the
// start), activations by block at the peak and at their own peak, the peak named by its final category, and samples no more
// than asked.
#include "titan/tools/memory_timeline.h"

#include <gtest/gtest.h>

namespace titan::tools {
namespace unit_tools_memory_timeline_test {

using platform::MemoryCategory;
using Kind = MemoryEvent::Kind;

MemoryEvent alloc(double t, uint64_t id, int64_t bytes, MemoryCategory c, int32_t block = -1) {
  return {Kind::Allocated, t, id, bytes, {c, block}};
}
MemoryEvent free_of(double t, uint64_t id, int64_t bytes, MemoryCategory c) {
  return {Kind::Freed, t, id, bytes, {c, -1}};
}
MemoryEvent retag(double t, uint64_t id, int64_t bytes, MemoryCategory from, MemoryCategory to) {
  return {Kind::Retagged, t, id, bytes, {from, -1}, to};
}

TEST(MemoryTimeline, PeakBreakdownWithRetagsCountedFromTheAllocation) {
  platform::CategoryBytes start{};
  start[platform::index_of(MemoryCategory::Parameters)] = 1000;
  start[platform::index_of(MemoryCategory::Other)] =
      50;  // id 9: optimizer state made before the step
  const std::vector<MemoryEvent> events = {
      alloc(0.1, 1, 100, MemoryCategory::Activations, 0),
      alloc(0.2, 2, 200, MemoryCategory::Activations, 1),
      alloc(0.3, 3, 300, MemoryCategory::ActivationGradients, 1),  // becomes a gradient
      alloc(0.4, 4, 400, MemoryCategory::Loss),                    // the peak: 2050
      free_of(0.5, 4, 400, MemoryCategory::Loss),
      free_of(0.6, 2, 200, MemoryCategory::Activations),
      retag(0.7, 3, 300, MemoryCategory::ActivationGradients, MemoryCategory::Gradients),
      retag(0.8, 9, 50, MemoryCategory::Other, MemoryCategory::OptimizerState),
  };
  const auto t = replay(start, events, 4);
  EXPECT_EQ(t.start.total(), 1050);
  EXPECT_EQ(t.start.bytes(MemoryCategory::OptimizerState), 50);  // from the start
  EXPECT_EQ(t.start.bytes(MemoryCategory::Other), 0);
  EXPECT_EQ(t.peak.total(), 2050);
  EXPECT_DOUBLE_EQ(t.peak.seconds, 0.4);
  EXPECT_EQ(t.peak_tag.category, MemoryCategory::Loss);
  EXPECT_EQ(t.peak.bytes(MemoryCategory::Gradients), 300);
  EXPECT_EQ(t.peak.bytes(MemoryCategory::ActivationGradients), 0);
  EXPECT_EQ(t.peak.bytes(MemoryCategory::Activations), 300);
  EXPECT_EQ(t.peak.bytes(MemoryCategory::Loss), 400);
  EXPECT_EQ(t.peak.activations_by_block, (std::map<int32_t, int64_t>{{0, 100}, {1, 200}}));
  EXPECT_TRUE(t.peak.activation_gradients_by_block.empty());
  EXPECT_DOUBLE_EQ(t.activations_peak.seconds, 0.2);  // the first moment of the highest
  EXPECT_EQ(t.activations_peak.activations_by_block,
            (std::map<int32_t, int64_t>{{0, 100}, {1, 200}}));
  EXPECT_EQ(t.end.total(), 1450);
  EXPECT_EQ(t.end.activations_by_block, (std::map<int32_t, int64_t>{{0, 100}}));
  EXPECT_LE(t.samples.size(), 4u);
  ASSERT_FALSE(t.samples.empty());
  for (const auto& s : t.samples) EXPECT_LE(s.total(), t.peak.total());
}

TEST(MemoryTimeline, NothingAboveTheStartKeepsTheStartAsPeak) {
  platform::CategoryBytes start{};
  start[platform::index_of(MemoryCategory::Parameters)] = 64;
  const auto t = replay(start, {free_of(0.5, 7, 64, MemoryCategory::Parameters)});
  EXPECT_EQ(t.peak.total(), 64);
  EXPECT_EQ(t.peak_tag.category, MemoryCategory::Other);
  EXPECT_EQ(t.end.total(), 0);
}

TEST(MemoryTimeline, ThePeaksAllocationIsNamedByItsFinalCategory) {
  const auto t = replay(
      {}, {alloc(0.1, 1, 100, MemoryCategory::ActivationGradients, 5),
           retag(0.2, 1, 100, MemoryCategory::ActivationGradients, MemoryCategory::Gradients)});
  EXPECT_EQ(t.peak_tag.category, MemoryCategory::Gradients);
  EXPECT_EQ(t.peak_tag.block, -1);
  EXPECT_EQ(t.peak.bytes(MemoryCategory::Gradients), 100);
  EXPECT_TRUE(t.peak.activation_gradients_by_block.empty());
}

}  // namespace unit_tools_memory_timeline_test
}  // namespace titan::tools
