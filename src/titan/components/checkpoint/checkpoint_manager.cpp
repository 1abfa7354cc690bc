#include "titan/components/checkpoint/checkpoint_manager.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <regex>
#include <set>

#include "titan/components/checkpoint/file_io.h"
#include "titan/components/checkpoint/hf_interchange.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/checkpoint/shard_writer.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"
#include "titan/platform/clock.h"
#include "titan/platform/env.h"

namespace titan::components::checkpoint {
namespace {

namespace fs = std::filesystem;
using platform::Clock;
using platform::seconds_since;

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown error";
  }
}

const std::vector<std::string>& loadable_parts() {
  static const std::vector<std::string> parts = {"model", "optimizer", "lr_scheduler",
                                                 "dataloader", "train_state"};
  return parts;
}

// The pieces to write: `in` itself (shallow), or, with `host_copy`, a host copy of what this
// rank writes (the async snapshot; pieces it does not write keep only their shape and dtype);
// floating-point data cast to `dtype` when given.
distributed::ShardedStateDict snapshot(const distributed::ShardedStateDict& in, bool host_copy,
                                       std::optional<torch::ScalarType> dtype) {
  distributed::ShardedStateDict out;
  for (const auto& [name, piece] : in) {
    distributed::ShardedTensor p = piece;
    const bool written = piece.writer && piece.local.defined();
    if (host_copy && !written && piece.local.defined()) {
      p.local = torch::empty(piece.local.sizes(), piece.local.options().device(torch::kMeta));
    }
    if (written) {
      if (dtype && p.local.is_floating_point()) p.local = p.local.to(*dtype);
      if (host_copy && (p.local.is_same(piece.local) || !p.local.device().is_cpu())) {
        p.local = p.local.to(torch::kCPU, p.local.scalar_type(), /*non_blocking=*/false,
                             /*copy=*/true);
      }
      p.local = p.local.contiguous();
    }
    out.emplace(name, std::move(p));
  }
  return out;
}

std::optional<int64_t> step_of(const std::string& name) {
  static const std::regex pattern("step-([0-9]+)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

bool is_leftover(const std::string& name) {
  static const std::regex pattern("step-[0-9]+(\\.old)?\\.tmp");
  return std::regex_match(name, pattern);
}

// The step-<N> folders of `folder`, by step.
std::set<int64_t> steps_in(const std::string& folder) {
  std::set<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(folder)) {
    auto step = step_of(entry.path().filename().string());
    if (step && entry.is_directory()) steps.insert(*step);
  }
  return steps;
}


}  // namespace

struct CheckpointManager::Job {
  int64_t step = 0;
  std::string dir;  // step-<N>.tmp
  bool model_only = false;
  bool hf_export = false;
  distributed::ShardedStateDict model;
  distributed::ShardedStateDict optimizer;
  nlohmann::json rank_state;
  std::string config_toml;
  std::exception_ptr error;  // what writing this rank's part threw
  Clock::time_point start;

  // Writes this rank's part (and, on rank 0, config.toml) into `dir`.
  void write(int rank) {
    if (rank == 0 && !config_toml.empty()) {
      write_file_synced((fs::path(dir) / "config.toml").string(), config_toml);
    }
    SectionsView sections = {{"model", &model}};
    if (!model_only) sections.emplace("optimizer", &optimizer);
    write_rank_part(dir, rank, sections, rank_state);
  }
};

CheckpointManager::CheckpointManager(config::CheckpointSection config,
                                     const std::string& dump_folder,
                                     std::shared_ptr<distributed::ProcessGroup> world,
                                     ModelIdentity model)
    : config_(std::move(config)),
      folder_((fs::path(dump_folder) / config_.folder).string()),
      world_(std::move(world)),
      model_(std::move(model)),
      export_dtype_(export_dtype(config_.export_dtype, "checkpoint.export_dtype")) {
  if (config_.async_mode != "disabled" && config_.async_mode != "async") {
    throw ConfigError(fmt::format("checkpoint.async_mode: '{}' is not valid (valid: disabled, "
                                  "async)",
                                  config_.async_mode));
  }
  if (config_.interval < 1) {
    throw ConfigError(fmt::format("checkpoint.interval = {} must be at least 1",
                                  config_.interval));
  }
  if (config_.keep_latest_k < 0) {
    throw ConfigError(fmt::format("checkpoint.keep_latest_k = {} must be 0 (keep all) or more",
                                  config_.keep_latest_k));
  }
  for (const auto& part : config_.exclude_from_loading) {
    const auto& valid = loadable_parts();
    if (std::find(valid.begin(), valid.end(), part) == valid.end()) {
      throw ConfigError(fmt::format("checkpoint.exclude_from_loading: '{}' is not a part of a "
                                    "checkpoint (valid: {})",
                                    part, fmt::join(valid, ", ")));
    }
  }
}

CheckpointManager::~CheckpointManager() {
  if (writer_.joinable()) writer_.join();
  if (pending_) {
    log::warn("[checkpoint] the background save of step {} was not completed (wait() was not "
              "called); {} is left incomplete",
              pending_->step, pending_->dir);
  }
}

std::string CheckpointManager::step_folder(int64_t step) const {
  return (fs::path(folder_) / fmt::format("step-{}", step)).string();
}

std::string CheckpointManager::tmp_folder(int64_t step) const { return step_folder(step) + ".tmp"; }

bool CheckpointManager::excluded(const std::string& part) const {
  const auto& ex = config_.exclude_from_loading;
  return std::find(ex.begin(), ex.end(), part) != ex.end();
}

bool CheckpointManager::should_save(int64_t step, int64_t last_step) {
  if (!config_.enable) return false;
  if (step == last_step || step % config_.interval == 0) return true;
  if (config_.interval_seconds <= 0) return false;
  const double since = seconds_since(last_save_);
  const bool due = on_rank0("decide whether step " + std::to_string(step) + " saves", [&] {
    return int64_t{since >= config_.interval_seconds};
  }) != 0;
  if (due && world_->rank() == 0) {
    log::info("[checkpoint] step {}: {:.1f} s since the last save (checkpoint.interval_seconds "
              "= {})",
              step, since, config_.interval_seconds);
  }
  return due;
}

void CheckpointManager::save(int64_t step, const distributed::ShardedStateDict& model,
                             const distributed::ShardedStateDict& optimizer,
                             const nlohmann::json& rank_state, const std::string& config_toml,
                             bool last) {
  if (!rank_state.is_object()) {
    throw CheckpointError(fmt::format("checkpoint step {}: rank_state must be a JSON object (one "
                                      "key per component), got {}",
                                      step, rank_state.type_name()));
  }
  wait();
  last_save_ = Clock::now();  // the cadence counts from each save's start (async ones too)
  auto job = std::make_unique<Job>();
  job->step = step;
  job->dir = tmp_folder(step);
  job->model_only = last && config_.last_save_model_only;
  job->hf_export = job->model_only && config_.last_save_in_hf;
  job->rank_state = rank_state;
  job->config_toml = config_toml;
  job->start = Clock::now();
  const bool background = config_.async_mode == "async" && !last;
  const auto dtype = job->model_only ? std::optional(export_dtype_) : std::nullopt;
  on_rank0("prepare " + job->dir, [&] {
    fs::remove_all(job->dir);
    fs::create_directories(job->dir);
    return 0;
  });
  try {
    job->model = snapshot(model, background, dtype);
    if (!job->model_only) job->optimizer = snapshot(optimizer, background, std::nullopt);
  } catch (...) {
    job->error = std::current_exception();
  }
  if (background && !job->error) {
    pending_ = std::move(job);
    writer_ = std::thread([job = pending_.get(), rank = world_->rank()] {
      try {
        job->write(rank);
      } catch (...) {
        job->error = std::current_exception();
      }
    });
    log::info("[checkpoint] step {}: host copy taken in {:.2f} s, writing in the background",
              step, seconds_since(pending_->start));
    return;
  }
  if (!job->error) {
    try {
      job->write(world_->rank());
    } catch (...) {
      job->error = std::current_exception();
    }
  }
  // Test hook (tests/integration/restart_test.cpp): killed with its files written, the
  // checkpoint not yet complete.
  platform::kill_if_asked(world_->rank(), step, "save");
  complete(*job);
}

void CheckpointManager::wait() {
  if (!pending_) return;
  if (writer_.joinable()) writer_.join();
  std::unique_ptr<Job> job = std::move(pending_);
  complete(*job);
}

void CheckpointManager::complete(Job& job) {
  agree(fmt::format("write its part of {}", job.dir), job.error);
  const std::string final_dir = step_folder(job.step);
  on_rank0("complete " + final_dir, [&] {
    std::vector<std::string> extra;
    if (!job.config_toml.empty()) extra.push_back("config.toml");
    finalize_checkpoint(job.dir, world_->size(), CheckpointHeader{job.step, model_, job.model_only},
                        extra);
    if (job.hf_export) {
      export_checkpoint_to_hf(job.dir, (fs::path(job.dir) / "hf").string(),
                              HfExportOptions{export_dtype_, kDefaultMaxShardBytes});
    }
    replace_directory(job.dir, final_dir);
    prune();
    return 0;
  });
  log::info("[checkpoint] saved {}{} in {:.2f} s", final_dir,
            job.model_only ? " (model only)" : "", seconds_since(job.start));
}

void CheckpointManager::prune() const {
  for (const auto& entry : fs::directory_iterator(folder_)) {
    if (is_leftover(entry.path().filename().string())) fs::remove_all(entry.path());
  }
  const std::set<int64_t> steps = steps_in(folder_);
  if (config_.keep_latest_k == 0 || static_cast<int64_t>(steps.size()) <= config_.keep_latest_k) {
    return;
  }
  auto it = steps.begin();
  for (size_t n = steps.size() - config_.keep_latest_k; n > 0; --n, ++it) {
    fs::remove_all(step_folder(*it));
    log::info("[checkpoint] removed {} (checkpoint.keep_latest_k = {})", step_folder(*it),
              config_.keep_latest_k);
  }
  sync_path(folder_);
}

std::optional<int64_t> CheckpointManager::find_step(int64_t below) const {
  std::set<int64_t> steps = steps_in(folder_);
  if (config_.load_step >= 0) {
    if (steps.count(config_.load_step) == 0) {
      throw CheckpointError(fmt::format("{}: checkpoint.load_step = {} but there is no step-{} "
                                        "(complete checkpoints: {})",
                                        folder_, config_.load_step, config_.load_step,
                                        steps.empty() ? std::string("none")
                                                      : fmt::format("{}", fmt::join(steps, ", "))));
    }
    return config_.load_step;
  }
  steps.erase(steps.lower_bound(below), steps.end());
  if (steps.empty()) return std::nullopt;
  return *steps.rbegin();
}

std::optional<LoadResult> CheckpointManager::load(distributed::ShardedStateDict& model,
                                                  distributed::ShardedStateDict& optimizer,
                                                  nlohmann::json& rank_state) {
  if (!config_.enable) return std::nullopt;
  wait();
  int64_t below = std::numeric_limits<int64_t>::max();
  std::exception_ptr newest_failure;
  while (true) {
    const int64_t step = on_rank0("find the checkpoint to load in " + folder_,
                                  [&] { return find_step(below).value_or(-1); });
    if (step < 0) break;
    if (config_.load_step >= 0) {
      return load_folder(step_folder(step), /*initial=*/false, model, optimizer, rank_state);
    }
    LoadResult result;
    const auto error =
        try_load_folder(step_folder(step), /*initial=*/false, model, optimizer, rank_state, result);
    // A weights-only fallback would start over from step 1 beside optimizer state the damaged
    // checkpoint may have half filled: stop instead, below.
    if (!error && !(newest_failure && result.model_only)) return result;
    if (!error) break;
    log::warn("[checkpoint] {} cannot be loaded ({}); trying the previous complete checkpoint "
              "(the folder is left as it is)",
              step_folder(step), message_of(error));
    if (!newest_failure) newest_failure = error;
    below = step;
  }
  if (newest_failure) {
    // Starting over would overwrite them: stop with the newest one's failure (a peer's shows
    // as CommError, so the launcher names the rank at fault).
    log::error("[checkpoint] no complete checkpoint in {} loads; stopping", folder_);
    std::rethrow_exception(newest_failure);
  }
  const std::string& initial = config_.initial_load_path;
  if (initial.empty()) return std::nullopt;
  if (!config_.initial_load_in_hf) {
    return load_folder(initial, /*initial=*/true, model, optimizer, rank_state);
  }
  const auto start = Clock::now();
  std::exception_ptr error;
  try {
    if (!excluded("model")) load_hf_into_pieces(initial, model_.family, model);
  } catch (...) {
    error = std::current_exception();
  }
  agree("load the Hugging Face weights of " + initial, error);
  log::info("[checkpoint] loaded Hugging Face weights from {} in {:.2f} s", initial,
            seconds_since(start));
  return LoadResult{0, initial, /*model_only=*/true};
}

LoadResult CheckpointManager::load_folder(const std::string& dir, bool initial,
                                          distributed::ShardedStateDict& model,
                                          distributed::ShardedStateDict& optimizer,
                                          nlohmann::json& rank_state) {
  LoadResult result;
  if (auto error = try_load_folder(dir, initial, model, optimizer, rank_state, result)) {
    std::rethrow_exception(error);
  }
  return result;
}

std::exception_ptr CheckpointManager::try_load_folder(const std::string& dir, bool initial,
                                                      distributed::ShardedStateDict& model,
                                                      distributed::ShardedStateDict& optimizer,
                                                      nlohmann::json& rank_state,
                                                      LoadResult& result) {
  const auto start = Clock::now();
  std::exception_ptr error;
  try {
    const CheckpointMetadata metadata = read_metadata(dir);
    if (!(metadata.model == model_)) {
      throw CheckpointError(fmt::format("{}: a checkpoint of {} '{}', but this run trains {} '{}' "
                                        "(another model or flavor cannot be loaded)",
                                        (fs::path(dir) / kMetadataFile).string(),
                                        metadata.model.family, metadata.model.flavor,
                                        model_.family, model_.flavor));
    }
    const bool model_only = metadata.model_only || (initial && config_.initial_load_model_only);
    SectionsRef sections;
    if (!excluded("model")) sections.emplace("model", &model);
    if (!model_only && !excluded("optimizer")) sections.emplace("optimizer", &optimizer);
    read_sections(dir, metadata, sections);
    if (!model_only) {
      const bool same_world = metadata.world_size == world_->size();
      const auto& saved = metadata.rank_states.at(same_world ? world_->rank() : 0);
      for (const auto& [key, value] : saved.items()) {
        if (!excluded(key)) rank_state[key] = value;
      }
    }
    result = LoadResult{initial && model_only ? 0 : metadata.step, dir, model_only};
  } catch (...) {
    error = std::current_exception();
  }
  if (auto agreed = agreed_error("load " + dir, error)) return agreed;
  log::info("[checkpoint] loaded {}{} in {:.2f} s", dir, result.model_only ? " (model only)" : "",
            seconds_since(start));
  return nullptr;
}

int64_t CheckpointManager::on_rank0(const std::string& what, const std::function<int64_t()>& f) {
  std::exception_ptr error;
  int64_t value = 0;
  if (world_->rank() == 0) {
    try {
      value = f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  torch::Tensor outcome = torch::tensor({int64_t(error ? 1 : 0), value}, torch::kInt64);
  world_->broadcast_(outcome, 0, "checkpoint: " + what);
  if (error) std::rethrow_exception(error);
  if (outcome[0].item<int64_t>() != 0) {
    // A peer's failure, not this rank's: the launcher blames the rank that failed on its own.
    throw CommError(fmt::format("rank {}: rank 0 failed to {} (its error is in its log)",
                                world_->rank(), what));
  }
  return outcome[1].item<int64_t>();
}

void CheckpointManager::agree(const std::string& what, const std::exception_ptr& local) {
  if (auto error = agreed_error(what, local)) std::rethrow_exception(error);
}

std::exception_ptr CheckpointManager::agreed_error(const std::string& what,
                                                   const std::exception_ptr& local) {
  torch::Tensor failed = torch::full({1}, local ? 1 : 0, torch::kInt64);
  world_->all_reduce_(failed, distributed::ReduceOp::Max, "checkpoint: " + what);
  if (local) return local;
  if (failed.item<int64_t>() == 0) return nullptr;
  return std::make_exception_ptr(CommError(fmt::format(
      "rank {}: another rank failed to {} (its error is in its log)", world_->rank(), what)));
}

}  // namespace titan::components::checkpoint
