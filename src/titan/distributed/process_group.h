// Process groups: joining the world through a c10d TCPStore (torchrun's environment variables),
// sub-groups for mesh dimensions, and the collectives titan needs with bounded waits.
// Gloo when the ranks compute on the CPU, NCCL when they compute on GPUs.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/torch.h>

#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace titan::distributed {

class FlightRecorder;  // flight_recorder.h

/// An exception's message; c10's without its backtrace.
std::string message_of(const std::exception& e);

/// Where this process sits, as torchrun describes it.
struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool agent_store = false;  // the launcher hosts the store: rank 0 joins it as a client
  int restart_count = 0;     // which start of the workers: the store keys' prefix

  /// From RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
  /// TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RESTART_COUNT; a process started without them
  /// is a world of one. Throws ConfigError on a malformed value.
  static WorldInfo from_env();
};

struct CommTimeouts {
  std::chrono::seconds init{300};   // rendezvous and group creation
  std::chrono::seconds train{100};  // every collective
};

enum class ReduceOp { Sum, Max, Min };

/// A send or collective in flight (ProcessGroup::send, start_*); ProcessGroup::finish waits
/// for it.
struct PendingWork {
  c10::intrusive_ptr<c10d::Work> work;
  torch::Tensor buffer;  // a send's data (kept alive until done) or the result being received
  torch::Device home = torch::kCPU;  // where the caller's tensors live
  std::string what;
  int64_t record = -1;     // its flight-recorder entry
  const char* op = "";     // "all_gather", "send", ...
  int64_t bytes = 0;       // of the input

  /// Started and not yet finished.
  bool active() const { return work || buffer.defined(); }
};

/// A group of ranks. Collectives block until done and throw CommError naming this rank, the
/// group and the operation `what` when the peer ranks fail or the train timeout passes (and
/// the flight recorder, when there is one, records each and dumps on that error). Results
/// count under the caller's memory tag (platform/memory.h). They
/// take tensors on any device and return results on the input's device; the data moves on the
/// group's device (the CPU for Gloo, the rank's GPU for NCCL).
class ProcessGroup {
 public:
  ProcessGroup(c10::intrusive_ptr<c10d::Backend> backend, std::vector<int> ranks,
               std::string name, int global_rank, std::chrono::seconds timeout,
               torch::Device device = torch::kCPU,
               std::shared_ptr<FlightRecorder> recorder = nullptr);

  /// Rank within this group, 0-based.
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::string& name() const { return name_; }
  /// Global ranks of the members, in group-rank order.
  const std::vector<int>& ranks() const { return ranks_; }

  /// In-place all-reduce of `t` (any shape and dtype the backend reduces: Gloo and NCCL take
  /// float32/64, bfloat16, int64).
  void all_reduce_(torch::Tensor& t, ReduceOp op, const std::string& what);
  /// In-place broadcast of `t` from group rank `root`.
  void broadcast_(torch::Tensor& t, int root, const std::string& what);
  /// Concatenation over dim 0 of every rank's `t` (same shape on all ranks):
  /// [n, ...] -> [size * n, ...].
  torch::Tensor all_gather(const torch::Tensor& t, const std::string& what);
  /// Sum over ranks of `t`, scattered: `t` is [size * n]; the result is this rank's [n] chunk
  /// of the sum.
  torch::Tensor reduce_scatter(const torch::Tensor& t, const std::string& what);
  /// all_gather, reduce_scatter and all_reduce_ without waiting: the caller computes while the
  /// data moves, then finish() returns the result (the all-reduce's sum: `t` itself when it is
  /// contiguous on the group's device). Every member starts the same collectives in the same
  /// order; `t` must not change until then.
  PendingWork start_all_gather(const torch::Tensor& t, const std::string& what);
  PendingWork start_reduce_scatter(const torch::Tensor& t, const std::string& what);
  PendingWork start_all_reduce(const torch::Tensor& t, ReduceOp op, const std::string& what);
  /// Rows of `t` [sum in_splits, ...] sent to each rank: in_splits[j] consecutive rows to group
  /// rank j; returns the rows received, [sum out_splits, ...], out_splits[j] from rank j, in
  /// rank order (splits may be 0; every rank's in_splits[r] equals rank r's out_splits here).
  torch::Tensor all_to_all(const torch::Tensor& t, const std::vector<int64_t>& out_splits,
                           const std::vector<int64_t>& in_splits, const std::string& what);
  /// all_to_all without waiting: the caller computes while the rows travel, then finish()
  /// returns them. The result's storage is pending.buffer when `t` is on the group's device.
  PendingWork start_all_to_all(const torch::Tensor& t, const std::vector<int64_t>& out_splits,
                               const std::vector<int64_t>& in_splits, const std::string& what);
  /// Blocks until every member arrives.
  void barrier(const std::string& what);
  /// Starts sending `t` to group rank `dst`, matched by the receive of the same `tag` (Gloo;
  /// NCCL matches sends and receives between two ranks in the order they are posted).
  PendingWork send(const torch::Tensor& t, int dst, int tag, const std::string& what);
  /// Waits until `pending` is done (a send: the peer has the data) and returns its result on
  /// the caller's device (a send: its data); `pending` is empty afterwards.
  torch::Tensor finish(PendingWork& pending);
  /// Receives into `t` (its shape and dtype are the sender's) from group rank `src` under
  /// `tag`; blocks until the data is here.
  void recv_(torch::Tensor& t, int src, int tag, const std::string& what);
  /// recv_ without waiting, into a new tensor shaped and typed like `like` (on its device):
  /// finish() returns it once the data is here.
  PendingWork start_recv(const torch::Tensor& like, int src, int tag, const std::string& what);
  /// Seconds this rank spent blocked in this group's collectives since the last call (and
  /// zeroes it): the communication that compute did not hide.
  double take_blocked_seconds() { return std::exchange(blocked_seconds_, 0.0); }

 private:
  /// Waits for `pending` within the train timeout, as a profiler range
  /// "<op> [<group>] <bytes> B: <what>".
  void wait(const PendingWork& pending);
  /// Records `op` on `t`, just started for `pending`, in `pending` and the flight recorder.
  void record(PendingWork& pending, const char* op, const torch::Tensor& t);
  /// Posts a receive into `buffer` (contiguous, on the group's device); finish() returns it on
  /// `home`.
  PendingWork post_recv(torch::Tensor buffer, torch::Device home, int src, int tag,
                        const std::string& what);
  /// `t` contiguous on the group's device (a copy when it is elsewhere).
  torch::Tensor on_device(const torch::Tensor& t) const;

  c10::intrusive_ptr<c10d::Backend> backend_;  // null for a group of one
  std::vector<int> ranks_;
  std::string name_;
  int global_rank_;
  int rank_;
  std::chrono::seconds timeout_;
  torch::Device device_;
  std::shared_ptr<FlightRecorder> recorder_;  // null: none
  int64_t seq_ = 0;  // operations recorded on this group
  double blocked_seconds_ = 0;
};

/// The joined world: the store, the global group, and sub-group creation.
class World {
 public:
  /// Rendezvous at info.master_addr:master_port (global rank 0 hosts the TCPStore) and create
  /// the global group; its groups communicate with NCCL when `device` is a GPU, else Gloo.
  /// Throws CommError naming the endpoint and the timeout on failure.
  /// Every group records its operations in `recorder` when given.
  static std::shared_ptr<World> join(const WorldInfo& info, CommTimeouts timeouts,
                                     torch::Device device = torch::kCPU,
                                     std::shared_ptr<FlightRecorder> recorder = nullptr);

  const WorldInfo& info() const { return info_; }
  std::shared_ptr<ProcessGroup> global() const { return global_; }
  /// A group of the given global ranks (this rank must be one of them). Collective over the
  /// members only: each member calls it with the same arguments, and the members of a group
  /// create their groups of the same name and ranks in the same order.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const std::string& name);

 private:
  World(WorldInfo info, CommTimeouts timeouts, c10::intrusive_ptr<c10d::Store> store,
        torch::Device device, std::shared_ptr<FlightRecorder> recorder);
  c10::intrusive_ptr<c10d::Backend> make_backend(c10::intrusive_ptr<c10d::Store> store, int rank,
                                                 int size);

  WorldInfo info_;
  CommTimeouts timeouts_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<ProcessGroup> global_;
  std::map<std::string, int> groups_created_;  // store prefix -> groups made with it
  torch::Device device_;
  std::shared_ptr<FlightRecorder> recorder_;
};

}  // namespace titan::distributed
