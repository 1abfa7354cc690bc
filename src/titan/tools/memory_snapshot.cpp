#include "titan/tools/memory_snapshot.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#ifdef TITAN_CUDA
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

#include <filesystem>
#include <fstream>
#include <mutex>

#include "titan/models/common/block_trace.h"
#include "titan/platform/clock.h"
#include "titan/platform/logging.h"
#include "titan/platform/memory.h"
#include "titan/tools/memory_timeline.h"
#include "titan/tools/memory_timeline_svg.h"

namespace titan::tools {
namespace {

using platform::MemoryCategory;

nlohmann::json by_category(const platform::CategoryBytes& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < platform::kMemoryCategories; ++i) {
    out[platform::memory_category_name(static_cast<MemoryCategory>(i))] = bytes[i];
  }
  return out;
}

nlohmann::json by_block(const std::map<int32_t, int64_t>& bytes) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [block, b] : bytes) {
    out[block < 0 ? std::string("outside blocks") : fmt::format("layers.{}", block)] = b;
  }
  return out;
}

nlohmann::json state_json(const MemoryState& s) {
  return {
      {"seconds", s.seconds}, {"bytes", s.total()}, {"by_category", by_category(s.by_category)}};
}

nlohmann::json timeline_json(const MemoryTimeline& t) {
  auto peak = state_json(t.peak);
  peak["reached_by"] = describe(t.peak_tag);
  peak["activations_by_block"] = by_block(t.peak.activations_by_block);
  peak["activation_gradients_by_block"] = by_block(t.peak.activation_gradients_by_block);
  auto activations_peak = state_json(t.activations_peak);
  activations_peak["activations_by_block"] = by_block(t.activations_peak.activations_by_block);
  return {{"peak", peak},
          {"activations_peak", activations_peak},
          {"start", state_json(t.start)},
          {"end", state_json(t.end)}};
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) log::warn("Could not write the memory snapshot {}", path.string());
}

}  // namespace

// One CPU step's allocation events, from step_begin to step_end.
class MemorySnapshot::Recorder final : public platform::MemoryObserver {
 public:
  Recorder() : start_bytes_(platform::live_bytes_by_category()) {
    models::set_tracing(true);
    platform::set_memory_observer(this);
  }
  ~Recorder() override {
    platform::set_memory_observer(nullptr);
    models::set_tracing(false);
  }

  void allocated(uint64_t id, int64_t bytes, platform::MemoryTag tag) override {
    events_.push_back({MemoryEvent::Kind::Allocated, now(), id, bytes, tag});
  }
  void freed(uint64_t id, int64_t bytes, platform::MemoryTag tag) override {
    events_.push_back({MemoryEvent::Kind::Freed, now(), id, bytes, tag});
  }
  void retagged(uint64_t id, int64_t bytes, MemoryCategory from, MemoryCategory to) override {
    events_.push_back({MemoryEvent::Kind::Retagged, now(), id, bytes, {from, -1}, to});
  }

  /// Stops recording and replays the step.
  MemoryTimeline finish() {
    platform::set_memory_observer(nullptr);
    return replay(start_bytes_, events_);
  }
  size_t events() const { return events_.size(); }

 private:
  double now() const { return platform::seconds_since(start_); }

  platform::CategoryBytes start_bytes_;
  platform::Clock::time_point start_ = platform::Clock::now();
  std::vector<MemoryEvent> events_;
};

MemorySnapshot::MemorySnapshot(const config::ProfilingSection& config, std::string folder, int rank,
                               torch::Device device)
    : config_(config), folder_(std::move(folder)), rank_(rank), device_(device) {
  if (!config_.enable_memory_snapshot) return;
  log::info("Memory profiler active. Snapshots will be saved at {}", folder_);
#ifdef TITAN_CUDA
  if (device_.is_cuda()) torch::cuda::_record_memory_history("all", "all", "all", 100000);
#endif
}

MemorySnapshot::~MemorySnapshot() = default;

std::string MemorySnapshot::step_folder(int64_t step, bool failed) const {
  return folder_ + fmt::format("/iteration_{}{}", step, failed ? "_exit" : "");
}

void MemorySnapshot::step_begin(int64_t step) {
  if (!config_.enable_memory_snapshot || step % config_.profile_freq != 0) return;
  if (device_.is_cpu()) recorder_ = std::make_unique<Recorder>();
}

void MemorySnapshot::classify(const std::vector<torch::Tensor>& params,
                              const std::vector<torch::Tensor>& optimizer_state) {
  for (const auto& p : params) {
    platform::retag_memory(p, MemoryCategory::Parameters);
    platform::retag_memory(p.grad(), MemoryCategory::Gradients);
  }
  for (const auto& s : optimizer_state) platform::retag_memory(s, MemoryCategory::OptimizerState);
}

void MemorySnapshot::step_end(int64_t step) {
  if (!config_.enable_memory_snapshot || step % config_.profile_freq != 0) return;
  const auto start = platform::Clock::now();
  const auto folder = std::filesystem::path(step_folder(step, false));
  if (!recorder_) {
#ifdef TITAN_CUDA
    write_text(folder / fmt::format("rank{}_memory_snapshot.pickle", rank_),
               torch::cuda::_memory_snapshot_pickled());
#endif
    return;
  }
  const auto timeline = recorder_->finish();
  const size_t events = recorder_->events();
  recorder_.reset();
  nlohmann::json doc = {
      {"rank", rank_}, {"step", step}, {"device", device_.str()}, {"events", events}};
  doc.update(timeline_json(timeline));
  write_text(folder / fmt::format("rank{}_memory_snapshot.json", rank_), doc.dump(2) + "\n");
  write_text(folder / fmt::format("rank{}_memory_timeline.svg", rank_),
             memory_timeline_svg(timeline, fmt::format("rank {} step {}", rank_, step)));
  log::info("Wrote the memory snapshot of step {} to {} in {:.2f} s (peak {:.1f} MiB)", step,
            folder.string(), platform::seconds_since(start),
            timeline.peak.total() / double(1 << 20));
}

void MemorySnapshot::allocation_failed(int64_t step, const std::string& error) {
  if (!config_.enable_memory_snapshot) return;
  const auto folder = std::filesystem::path(step_folder(step, true));
  if (device_.is_cuda()) {
#ifdef TITAN_CUDA
    write_text(folder / fmt::format("rank{}_memory_snapshot.pickle", rank_),
               torch::cuda::_memory_snapshot_pickled());
#endif
    return;
  }
  nlohmann::json doc = {
      {"rank", rank_}, {"step", step}, {"device", device_.str()}, {"error", error}};
  if (const auto failure = platform::last_allocation_failure()) {
    doc["requested_bytes"] = failure->requested;
    doc["live_when_failed"] = by_category(failure->live);
  }
  if (recorder_) {
    const auto timeline = recorder_->finish();
    recorder_.reset();
    doc.update(timeline_json(timeline));
    write_text(folder / fmt::format("rank{}_memory_timeline.svg", rank_),
               memory_timeline_svg(timeline, fmt::format("rank {} step {} (failed)", rank_, step)));
  }
  const auto path = folder / fmt::format("rank{}_memory_snapshot.json", rank_);
  write_text(path, doc.dump(2) + "\n");
  log::error("Out of memory in step {}: wrote the memory snapshot {}", step, path.string());
}

}  // namespace titan::tools
