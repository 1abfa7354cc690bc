// One step of CPU memory replayed from the counting allocator's events (platform/memory.h):
// the live bytes by category at the start, at the peak and at the end, the activations by block
// at the peak and where activations peaked (the end of forward), and samples for a picture. An allocation counts under its final category for its
// whole life: retag_memory() during the step (gradients and optimizer state are retagged after
// the optimizer's step) reclassifies it from its allocation on, or from the start for one made
// before the step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "titan/platform/memory.h"

namespace titan::tools {

struct MemoryEvent {
  enum class Kind { Allocated, Freed, Retagged };
  Kind kind = Kind::Allocated;
  double seconds = 0;  // since the step started
  uint64_t id = 0;
  int64_t bytes = 0;
  platform::MemoryTag tag;  // the allocation's tag then (Retagged: before the retag)
  platform::MemoryCategory to = platform::MemoryCategory::Other;  // Retagged: the new one
};

/// What was alive at one moment.
struct MemoryState {
  double seconds = 0;
  platform::CategoryBytes by_category{};
  /// Bytes of Activations / ActivationGradients made during the step, by block (-1: outside
  /// the blocks).
  std::map<int32_t, int64_t> activations_by_block, activation_gradients_by_block;

  int64_t total() const;
  int64_t bytes(platform::MemoryCategory c) const { return by_category[platform::index_of(c)]; }
};

struct MemoryTimeline {
  MemoryState start, peak, end;
  /// The first moment the activations were highest: which blocks hold how much does not
  /// depend on when collectives finish, unlike the peak's.
  MemoryState activations_peak;
  /// Where the allocation that reached the peak counts (its final category; Other when
  /// nothing rose above the start).
  platform::MemoryTag peak_tag;
  /// At most max_samples moments spread over the step (each the highest of its time slice).
  std::vector<MemoryState> samples;
};

/// What a tag names: "activation_gradients of layers.3", "communication", ...
std::string describe(const platform::MemoryTag& tag);

/// The step whose live bytes were `start` when `events` (in order) began.
MemoryTimeline replay(const platform::CategoryBytes& start, const std::vector<MemoryEvent>& events,
                      size_t max_samples = 600);

}  // namespace titan::tools
