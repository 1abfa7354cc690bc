// Checkpointing a training run, as TorchTitan's CheckpointManager (components/checkpoint.py):
// when to save, sharded saves into `<job.dump_folder>/<checkpoint.folder>/step-<N>/` that never
// leave a partial checkpoint behind, background (async) writing, keep_latest_k, and resuming
// from the latest complete checkpoint, or from checkpoint.initial_load_path, under any layout.
//
// Save protocol (every rank of the world calls save() with the same step):
//   1. rank 0 empties `step-<N>.tmp`; the others wait for it (a broadcast of its status);
//   2. every rank writes its part (shard_writer.h) into it, rank 0 also config.toml; with
//      async_mode = "async" the pieces are first copied to host memory and the writing runs on a
//      background thread while training continues;
//   3. completion: an all-reduce of every rank's write status (the barrier, carrying failure),
//      then rank 0 merges metadata.json (finalize_checkpoint), writes `hf/` when the last save is
//      exported to Hugging Face, renames `step-<N>.tmp` -> `step-<N>` (file_io.h
//      replace_directory) and only then deletes checkpoints beyond keep_latest_k; a broadcast of
//      its status ends the save on every rank.
// Synchronous saves complete before save() returns. An async save completes at the next save(),
// wait() or load(): the background thread runs no collectives, because the world group may not
// be used from two threads at once and a group of its own would have to be created by every
// rank up front. So the writing (the slow part) overlaps training and the cheap completion runs
// on the caller's thread. The destructor only joins the thread: an async save that nobody
// completed with wait() stays `step-<N>.tmp`.
// A crash or SIGKILL at any point before the rename leaves `step-<N>.tmp`, which loading ignores:
// the previous `step-<M>` stays the latest complete checkpoint. All ranks must see the same
// folder (a shared file system when there are several nodes).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/config/job_config.h"
#include "titan/distributed/process_group.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/platform/clock.h"

namespace titan::components::checkpoint {

/// What load() restored.
struct LoadResult {
  /// The step the checkpoint was saved at (training continues with step + 1); 0 for an initial
  /// load (initial_load_path) of model weights only.
  int64_t step = 0;
  std::string path;  // the folder loaded
  /// Only model weights were restored (a model-only or Hugging Face checkpoint, or
  /// initial_load_model_only): optimizer pieces and rank_state are left as they were.
  bool model_only = false;
};

class CheckpointManager {
 public:
  /// `config`: the checkpoint section; checkpoints live in `dump_folder`/config.folder.
  /// `world`: every rank that holds state (a group of one for a single process). `model`: the
  /// family and flavor trained; a checkpoint of another one is refused. Throws ConfigError
  /// naming the key for an unknown async_mode, export_dtype or exclude_from_loading entry
  /// (valid: model, optimizer, lr_scheduler, dataloader, train_state), interval < 1 or
  /// keep_latest_k < 0.
  CheckpointManager(config::CheckpointSection config, const std::string& dump_folder,
                    std::shared_ptr<distributed::ProcessGroup> world, ModelIdentity model);
  /// Joins a background write; does not complete it (see above).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  /// `<dump_folder>/<checkpoint.folder>`.
  const std::string& folder() const { return folder_; }
  /// `folder()/step-<step>`.
  std::string step_folder(int64_t step) const;

  /// True when checkpoint.enable and `step` is a multiple of checkpoint.interval or is
  /// `last_step` (training.steps), or checkpoint.interval_seconds have passed on rank 0 since
  /// the last save started (or since this manager was made). Collective when
  /// interval_seconds > 0: every rank gets rank 0's answer.
  bool should_save(int64_t step, int64_t last_step);

  /// Saves checkpoint `step` (collective: every rank, same step). `model` and `optimizer` are
  /// this rank's pieces (any device; FSDP row shards, or whole tensors with writer = false on
  /// all but one replica). `rank_state`: a JSON object of this rank's other state, one key per
  /// component ("lr_scheduler", "dataloader", "train_state" with step, tokens seen and RNG
  /// states); `config_toml`: the resolved config, stored as config.toml. With `last` (the final
  /// step): checkpoint.last_save_model_only stores the model alone, cast to
  /// checkpoint.export_dtype, and checkpoint.last_save_in_hf adds a Hugging Face export in
  /// `step-<N>/hf/` (hf_interchange.h); the last save is always synchronous. First completes a
  /// pending async save. Throws CheckpointError naming the tensor or file at fault (on every
  /// rank when any rank fails; the previous checkpoint then stays the latest), CommError when
  /// ranks stop answering.
  void save(int64_t step, const distributed::ShardedStateDict& model,
            const distributed::ShardedStateDict& optimizer, const nlohmann::json& rank_state,
            const std::string& config_toml, bool last);

  /// Completes a pending async save (collective; no-op when none is pending). Throws as save().
  void wait();

  /// Resumes (collective). Without checkpoint.enable: nothing. Otherwise loads
  /// `step-<load_step>`, or the highest `step-<N>` of folder() that loads when load_step = -1
  /// (`step-<N>.tmp` folders are ignored; one that fails to load, e.g. a truncated or corrupt
  /// file, is named in a warning and left in place, and the next lower one is tried; when no
  /// full one loads, the newest one's error is thrown), or, when
  /// the folder holds none, initial_load_path (a
  /// titan step folder, or a Hugging Face folder with initial_load_in_hf; model only with
  /// initial_load_model_only). Fills the pieces of `model` and `optimizer` in place (resharding
  /// from any saved layout), except the parts named in exclude_from_loading, and replaces the
  /// keys of `rank_state` the checkpoint holds (except excluded ones) with this rank's saved
  /// values, or rank 0's when the checkpoint was written by a different world size. Returns
  /// what was loaded, or nullopt when there is nothing to load. Throws CheckpointError, on every
  /// rank, naming the file or tensor at fault: a missing, truncated or corrupt file (size,
  /// SHA-256), a `step-<N>` without a valid metadata.json (folders appear complete through the
  /// rename, so one without is damaged), a checkpoint of another model or flavor, a missing
  /// tensor or one of another global shape.
  std::optional<LoadResult> load(distributed::ShardedStateDict& model,
                                 distributed::ShardedStateDict& optimizer,
                                 nlohmann::json& rank_state);

 private:
  struct Job;  // one save in progress

  std::string tmp_folder(int64_t step) const;
  bool excluded(const std::string& part) const;
  void complete(Job& job);
  void prune() const;
  /// checkpoint.load_step, or the highest complete step below `below`.
  std::optional<int64_t> find_step(int64_t below) const;
  LoadResult load_folder(const std::string& dir, bool initial, distributed::ShardedStateDict& model,
                         distributed::ShardedStateDict& optimizer, nlohmann::json& rank_state);
  /// load_folder, returning the failure (this rank's error, or CommError for a peer's) instead
  /// of throwing it; every rank returns one when any rank failed.
  std::exception_ptr try_load_folder(const std::string& dir, bool initial,
                                     distributed::ShardedStateDict& model,
                                     distributed::ShardedStateDict& optimizer,
                                     nlohmann::json& rank_state, LoadResult& result);
  /// Runs `f` on rank 0 and shares its outcome: its int64 result, or its failure (rank 0
  /// rethrows its own; the others throw CommError, a peer's failure).
  int64_t on_rank0(const std::string& what, const std::function<int64_t()>& f);
  /// Rethrows `local` or, when another rank failed `what`, throws CommError (a peer's failure:
  /// the launcher then shows the failing rank's error; collective).
  void agree(const std::string& what, const std::exception_ptr& local);
  /// agree()'s outcome without throwing: `local`, a CommError for a peer's failure, or null.
  std::exception_ptr agreed_error(const std::string& what, const std::exception_ptr& local);

  config::CheckpointSection config_;
  std::string folder_;
  std::shared_ptr<distributed::ProcessGroup> world_;
  ModelIdentity model_;
  torch::ScalarType export_dtype_;
  std::unique_ptr<Job> pending_;
  platform::Clock::time_point last_save_ = platform::Clock::now();  // or construction
  std::thread writer_;
};

}  // namespace titan::components::checkpoint
