#include "titan/tools/memory_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace titan::tools {
namespace {

using platform::MemoryCategory;
using Kind = MemoryEvent::Kind;
using platform::index_of;

// Where each allocation counts: its final category, and its block when made during the step.
struct Placement {
  MemoryCategory category;
  int32_t block;
};

class Replayer {
 public:
  Replayer(const platform::CategoryBytes& start, const std::vector<MemoryEvent>& events)
      : events_(events) {
    for (const auto& e : events) {
      if (e.kind == Kind::Allocated) made_.emplace(e.id, Placement{e.tag.category, e.tag.block});
      if (e.kind == Kind::Retagged) final_[e.id] = e.to;
    }
    state_.by_category = start;
    // An allocation from before the step retagged during it counts under its new category
    // from the start (its first retag names the category it had then).
    std::unordered_map<uint64_t, bool> moved;
    for (const auto& e : events) {
      if (e.kind != Kind::Retagged || made_.count(e.id) || !moved.emplace(e.id, true).second) {
        continue;
      }
      state_.by_category[index_of(e.tag.category)] -= e.bytes;
      state_.by_category[index_of(final_.at(e.id))] += e.bytes;
    }
  }

  const MemoryState& state() const { return state_; }

  /// Where event `e`'s allocation counts: its final category, with its block while that is
  /// the category it was made under.
  platform::MemoryTag placed(const MemoryEvent& e) const {
    const auto f = final_.find(e.id);
    if (f == final_.end() || f->second == e.tag.category) return e.tag;
    return {f->second, -1};
  }

  /// Applies event i.
  void apply(size_t i) {
    const auto& e = events_[i];
    state_.seconds = e.seconds;
    if (e.kind == Kind::Retagged) return;  // placed for the whole life already
    const int64_t delta = e.kind == Kind::Allocated ? e.bytes : -e.bytes;
    const auto made = made_.find(e.id);  // end(): from before the step
    const auto f = final_.find(e.id);
    const MemoryCategory category = f != final_.end()     ? f->second
                                    : made != made_.end() ? made->second.category
                                                          : e.tag.category;
    state_.by_category[index_of(category)] += delta;
    if (made == made_.end()) return;
    if (category == MemoryCategory::Activations) {
      add(state_.activations_by_block, made->second.block, delta);
    } else if (category == MemoryCategory::ActivationGradients) {
      add(state_.activation_gradients_by_block, made->second.block, delta);
    }
  }

 private:
  static void add(std::map<int32_t, int64_t>& by_block, int32_t block, int64_t delta) {
    if ((by_block[block] += delta) == 0) by_block.erase(block);
  }

  const std::vector<MemoryEvent>& events_;
  std::unordered_map<uint64_t, Placement> made_;
  std::unordered_map<uint64_t, MemoryCategory> final_;
  MemoryState state_;
};

}  // namespace

std::string describe(const platform::MemoryTag& tag) {
  std::string name = platform::memory_category_name(tag.category);
  return tag.block < 0 ? name : fmt::format("{} of layers.{}", name, tag.block);
}

int64_t MemoryState::total() const {
  return std::accumulate(by_category.begin(), by_category.end(), int64_t{0});
}

MemoryTimeline replay(const platform::CategoryBytes& start, const std::vector<MemoryEvent>& events,
                      size_t max_samples) {
  // Pass 1: the total after each event, the peak, and the highest moment of each time slice.
  std::vector<int64_t> totals(events.size());
  int64_t total = std::accumulate(start.begin(), start.end(), int64_t{0});
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.kind != Kind::Retagged) total += e.kind == Kind::Allocated ? e.bytes : -e.bytes;
    totals[i] = total;
  }
  const double span = events.empty() ? 0.0 : events.back().seconds;
  const size_t slices = std::max<size_t>(max_samples, 1);
  std::vector<int64_t> highest(slices, -1);  // event index per slice
  int64_t peak_index = -1, peak = std::accumulate(start.begin(), start.end(), int64_t{0});
  for (size_t i = 0; i < events.size(); ++i) {
    if (totals[i] > peak) peak = totals[i], peak_index = static_cast<int64_t>(i);
    const auto slice =
        std::min(slices - 1, static_cast<size_t>(span > 0 ? events[i].seconds / span * slices : 0));
    if (highest[slice] < 0 || totals[i] > totals[highest[slice]]) highest[slice] = i;
  }
  // Pass 2: the states at those moments.
  Replayer replayer(start, events);
  MemoryTimeline out;
  out.start = out.peak = out.activations_peak = replayer.state();
  std::vector<bool> sampled(events.size(), false);
  for (int64_t i : highest) {
    if (i >= 0) sampled[i] = true;
  }
  for (size_t i = 0; i < events.size(); ++i) {
    replayer.apply(i);
    if (static_cast<int64_t>(i) == peak_index) {
      out.peak = replayer.state();
      out.peak_tag = replayer.placed(events[i]);
    }
    if (sampled[i]) out.samples.push_back(replayer.state());
    if (replayer.state().bytes(MemoryCategory::Activations) >
        out.activations_peak.bytes(MemoryCategory::Activations)) {
      out.activations_peak = replayer.state();
    }
  }
  out.end = replayer.state();
  return out;
}

}  // namespace titan::tools
