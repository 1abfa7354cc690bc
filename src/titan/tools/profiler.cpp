#include "titan/tools/profiler.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "titan/errors.h"
#include "titan/models/common/block_trace.h"
#include "titan/platform/clock.h"
#include "titan/platform/logging.h"
#include "titan/tools/trace_pieces.h"

namespace titan::tools {
namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

ProfilerConfig kineto_config() {
  return ProfilerConfig(ProfilerState::KINETO, /*report_input_shapes=*/true);
}

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> out{ActivityType::CPU};
  if (cuda) out.insert(ActivityType::CUDA);
  return out;
}

void join_backward_spans_in(const std::filesystem::path& path) {
  nlohmann::json trace;
  try {
    std::ifstream in(path);
    trace = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    log::warn("The profiler trace {} is not JSON titan can read ({}): left as Kineto wrote it",
              path.string(), e.what());
    return;
  }
  join_backward_spans(trace);
  std::ofstream(path) << trace.dump() << "\n";
}

}  // namespace

void check_profiling(const config::ProfilingSection& config) {
  if (!config.enable_profiling) return;
  if (config.profiler_active < 1 || config.profiler_warmup < 0 ||
      config.profile_freq < config.profiler_warmup + config.profiler_active) {
    throw ConfigError(fmt::format(
        "profiling.profile_freq = {} must be at least profiling.profiler_warmup = {} + "
        "profiling.profiler_active = {} (profiler_active at least 1)",
        config.profile_freq, config.profiler_warmup, config.profiler_active));
  }
}

Profiler::Profiler(const config::ProfilingSection& config, std::string trace_folder, int rank,
                   bool cuda)
    : config_(config), trace_folder_(std::move(trace_folder)), rank_(rank), cuda_(cuda) {
  if (config_.enable_profiling) {
    log::info("Profiling active. Traces will be saved at {}", trace_folder_);
    // Kineto reads its log level when it starts. On the CPU all it says is stage and USDT
    // lines, and an ERROR that it found no GPU, from every rank; level 6 silences
    // it. KINETO_LOG_LEVEL set by the user, and GPU runs, keep Kineto's own.
    if (!cuda_) setenv("KINETO_LOG_LEVEL", "6", /*overwrite=*/0);
  }
}

Profiler::~Profiler() {
  if (!recording_) return;
  kineto::disableProfiler();
  models::set_tracing(false);
}

int64_t Profiler::phase(int64_t step) const { return (step - 1) % config_.profile_freq + 1; }

void Profiler::prepare() {
  if (prepared_) return;
  kineto::prepareProfiler(kineto_config(), activities(cuda_));
  prepared_ = true;
}

void Profiler::step_begin(int64_t step) {
  if (!config_.enable_profiling) return;
  const int64_t first_active = config_.profile_freq - config_.profiler_active + 1;
  const int64_t p = phase(step);
  if (p == first_active - config_.profiler_warmup || p == first_active) prepare();
  if (p == first_active) {
    kineto::enableProfiler(kineto_config(), activities(cuda_));
    models::set_tracing(true);
    recording_ = true;
  }
}

void Profiler::step_end(int64_t step) {
  if (!recording_ || phase(step) != config_.profile_freq) return;
  const auto start = platform::Clock::now();
  auto result = kineto::disableProfiler();
  models::set_tracing(false);
  recording_ = prepared_ = false;
  const auto folder =
      std::filesystem::path(trace_folder_) / fmt::format("iteration_{}", step);
  std::filesystem::create_directories(folder);
  const auto path = folder / fmt::format("rank{}_trace.json", rank_);
  result->save(path.string());
  join_backward_spans_in(path);
  log::info("Wrote the profiler trace of step {} to {} in {:.2f} s", step, path.string(),
            platform::seconds_since(start));
}

}  // namespace titan::tools
