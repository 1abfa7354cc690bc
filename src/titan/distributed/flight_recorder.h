// The collective flight recorder (c10d's FlightRecorder; TorchTitan's comm.trace_buf_size and
// comm.save_traces_folder): each rank keeps its last N collectives and point-to-point transfers
// (its sequence number on the group, the same on every member; the group and its ranks, the
// operation, the tensor's shape and dtype, start and end times, state). A rank writes them to
// <dump_folder>/<save_traces_folder>/rank_<r>.json when one of its collectives times out or
// fails, and when it receives SIGUSR1 (the launcher's, after another rank failed); the
// launcher then reads every rank's file and names the rank and collective the others were
// waiting for (explain_comm_traces).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace titan::distributed {

struct CollectiveRecord {
  int64_t id = 0;         // this rank's record number, over all groups
  std::string group;      // the group's name
  std::vector<int> ranks; // its members' global ranks
  int64_t seq = 0;        // the operation's number on the group: the same on every member
  std::string op;         // all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, ...
  std::string what;       // titan's name for it ("loss all-reduce", "FSDP all-gather of ...")
  std::vector<int64_t> shape;
  std::string dtype;
  double start = 0;       // seconds since the epoch
  double end = 0;         // 0 while in flight
  std::string state;      // "started", "waiting" (its caller waits for it), "completed", "failed"
};

class FlightRecorder {
 public:
  /// Keeps the last `capacity` records of global rank `rank` (0: records nothing), for
  /// `folder`/rank_<rank>.json.
  FlightRecorder(int rank, int64_t capacity, std::filesystem::path folder);

  bool enabled() const { return capacity_ > 0; }
  /// Records an operation that just started; returns its id (-1 when disabled).
  int64_t start(const std::string& group, const std::vector<int>& ranks, int64_t seq,
                const char* op, const std::string& what, const torch::Tensor& t);
  /// Marks record `id` as waited for (its caller blocks on it until end()).
  void waiting(int64_t id);
  /// Marks record `id` completed or failed (nothing when it left the buffer).
  void end(int64_t id, bool ok);
  /// The records, oldest first.
  std::vector<CollectiveRecord> records() const;
  /// Writes the records and `reason` to rank_<rank>.json (through a temporary file and a
  /// rename; one dump at a time). Never throws: it runs on the way out of a failure.
  void dump(const std::string& reason) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  int rank_;
  int64_t capacity_;
  std::filesystem::path path_;
  mutable std::mutex mutex_;       // the records
  mutable std::mutex dump_mutex_;  // the file
  /// Record `id` while it is in the buffer, else null (mutex_ held).
  CollectiveRecord* find(int64_t id);

  std::deque<CollectiveRecord> records_;
  int64_t next_id_ = 0;
};

/// From now on SIGUSR1 makes this process dump `recorder`, from a thread of its own (the main
/// thread may be stuck in compute or a collective). One recorder per process, a worker's: later
/// calls do nothing. Before the call, SIGUSR1 ends the process (its default).
void dump_comm_traces_on_signal(std::shared_ptr<FlightRecorder> recorder);

/// What the rank_<r>.json files in `folder` say about a hang or failure, as lines for the
/// launcher: the first failed (else waited-for, else unfinished) operation, and for each other
/// member of its
/// group whether it was waiting in the same one or never started it (its last operation on
/// the group and overall). Files written before `since` (an earlier run's) are left out. Empty
/// when the folder holds no such trace.
std::vector<std::string> explain_comm_traces(
    const std::filesystem::path& folder,
    std::filesystem::file_time_type since = std::filesystem::file_time_type::min());

}  // namespace titan::distributed
