#include "titan/distributed/process_group.h"

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef TITAN_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <numeric>

#include "titan/distributed/flight_recorder.h"
#include "titan/errors.h"
#include "titan/platform/clock.h"
#include "titan/platform/env.h"

namespace titan::distributed {
namespace {

using platform::env_int;

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return c10d::ReduceOp::SUM;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

std::string message_of(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

WorldInfo WorldInfo::from_env() {
  WorldInfo w;
  w.rank = env_int("RANK", 0);
  w.world_size = env_int("WORLD_SIZE", 1);
  w.local_rank = env_int("LOCAL_RANK", w.rank);
  w.local_world_size = env_int("LOCAL_WORLD_SIZE", w.world_size);
  if (const char* a = std::getenv("MASTER_ADDR")) w.master_addr = a;
  w.master_port = env_int("MASTER_PORT", 29500);
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  w.agent_store = agent && (std::string(agent) == "True" || std::string(agent) == "1");
  w.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0);
  if (w.world_size < 1 || w.rank >= w.world_size) {
    throw ConfigError(fmt::format("RANK={} must be below WORLD_SIZE={}", w.rank, w.world_size));
  }
  return w;
}

ProcessGroup::ProcessGroup(c10::intrusive_ptr<c10d::Backend> backend, std::vector<int> ranks,
                           std::string name, int global_rank, std::chrono::seconds timeout,
                           torch::Device device, std::shared_ptr<FlightRecorder> recorder)
    : backend_(std::move(backend)),
      ranks_(std::move(ranks)),
      name_(std::move(name)),
      global_rank_(global_rank),
      timeout_(timeout),
      device_(device),
      recorder_(std::move(recorder)) {
  auto it = std::find(ranks_.begin(), ranks_.end(), global_rank_);
  TORCH_CHECK(it != ranks_.end(), "rank ", global_rank_, " is not in group ", name_);
  rank_ = static_cast<int>(it - ranks_.begin());
}

void ProcessGroup::record(PendingWork& pending, const char* op, const torch::Tensor& t) {
  pending.op = op;
  pending.bytes = static_cast<int64_t>(t.numel() * t.element_size());
  if (recorder_) pending.record = recorder_->start(name_, ranks_, seq_++, op, pending.what, t);
}

void ProcessGroup::wait(const PendingWork& pending) {
  const auto& what = pending.what;
  const int64_t record = pending.record;
  RECORD_USER_SCOPE(fmt::format("{} [{}] {} B: {}", pending.op, name_, pending.bytes, what));
  const auto start = platform::Clock::now();
  if (recorder_) recorder_->waiting(record);
  try {
    pending.work->wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
    blocked_seconds_ += platform::seconds_since(start);
  } catch (const std::exception& e) {
    const auto error =
        fmt::format("rank {}: {} on group '{}' ({} ranks) failed or timed out "
                    "(comm.train_timeout_seconds = {}): {}",
                    global_rank_, what, name_, size(), timeout_.count(), message_of(e));
    if (recorder_) {
      recorder_->end(record, false);
      recorder_->dump(error);
    }
    throw CommError(error);
  }
  if (recorder_) recorder_->end(record, true);
}

torch::Tensor ProcessGroup::on_device(const torch::Tensor& t) const {
  return t.device() == device_ ? t.contiguous() : t.to(device_).contiguous();
}

void ProcessGroup::all_reduce_(torch::Tensor& t, ReduceOp op, const std::string& what) {
  auto pending = start_all_reduce(t, op, what);
  auto sum = finish(pending);
  if (!sum.is_same(t)) t.copy_(sum);
}

PendingWork ProcessGroup::start_all_reduce(const torch::Tensor& t, ReduceOp op,
                                           const std::string& what) {
  if (!backend_) return PendingWork{nullptr, t, t.device(), what};
  PendingWork pending{nullptr, on_device(t), t.device(), what};
  std::vector<torch::Tensor> tensors{pending.buffer};
  c10d::AllreduceOptions opts;
  opts.reduceOp = to_c10d(op);
  pending.work = backend_->allreduce(tensors, opts);
  record(pending, "all_reduce", pending.buffer);
  return pending;
}

void ProcessGroup::broadcast_(torch::Tensor& t, int root, const std::string& what) {
  if (!backend_) return;
  torch::Tensor buf = on_device(t);
  std::vector<torch::Tensor> tensors{buf};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  PendingWork pending{backend_->broadcast(tensors, opts), buf, t.device(), what};
  record(pending, "broadcast", buf);
  wait(pending);
  if (!buf.is_same(t)) t.copy_(buf);
}

torch::Tensor ProcessGroup::all_gather(const torch::Tensor& t, const std::string& what) {
  auto pending = start_all_gather(t, what);
  return finish(pending);
}

PendingWork ProcessGroup::start_all_gather(const torch::Tensor& t, const std::string& what) {
  if (!backend_) return PendingWork{nullptr, t.clone(), t.device(), what};
  torch::Tensor in = on_device(t);
  auto shape = t.sizes().vec();
  if (shape.empty()) shape.push_back(1);
  shape[0] *= size();
  PendingWork pending{nullptr, torch::empty(shape, in.options()), t.device(), what};
  pending.work = backend_->_allgather_base(pending.buffer, in);  // buffer: [size * n, ...]
  record(pending, "all_gather", in);
  return pending;
}

torch::Tensor ProcessGroup::reduce_scatter(const torch::Tensor& t, const std::string& what) {
  auto pending = start_reduce_scatter(t, what);
  return finish(pending);
}

PendingWork ProcessGroup::start_reduce_scatter(const torch::Tensor& t, const std::string& what) {
  TORCH_CHECK(t.dim() == 1 && t.numel() % size() == 0, "reduce_scatter of ", what,
              ": expected a flat tensor divisible by ", size(), ", got ", t.sizes());
  if (!backend_) return PendingWork{nullptr, t.clone(), t.device(), what};
  torch::Tensor in = on_device(t);  // in: [size * n]
  PendingWork pending{nullptr, torch::empty({t.numel() / size()}, in.options()), t.device(),
                      what};  // buffer: [n]
  pending.work = backend_->_reduce_scatter_base(pending.buffer, in);
  record(pending, "reduce_scatter", in);
  return pending;
}

torch::Tensor ProcessGroup::all_to_all(const torch::Tensor& t,
                                       const std::vector<int64_t>& out_splits,
                                       const std::vector<int64_t>& in_splits,
                                       const std::string& what) {
  auto pending = start_all_to_all(t, out_splits, in_splits, what);
  return finish(pending);
}

PendingWork ProcessGroup::start_all_to_all(const torch::Tensor& t,
                                           const std::vector<int64_t>& out_splits,
                                           const std::vector<int64_t>& in_splits,
                                           const std::string& what) {
  const auto total = [](const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  };
  TORCH_CHECK(t.dim() >= 1 && static_cast<int>(in_splits.size()) == size() &&
                  static_cast<int>(out_splits.size()) == size() && total(in_splits) == t.size(0),
              "all_to_all of ", what, ": splits must have ", size(), " entries and the input's ",
              t.size(0), " rows");
  if (!backend_) return PendingWork{nullptr, t.clone(), t.device(), what};
  torch::Tensor in = on_device(t);  // in: [sum in_splits, ...]
  auto shape = t.sizes().vec();
  shape[0] = total(out_splits);
  PendingWork pending{nullptr, torch::empty(shape, in.options()), t.device(), what};
  auto out_sizes = out_splits, in_sizes = in_splits;  // out: [sum out_splits, ...]
  pending.work = backend_->alltoall_base(pending.buffer, in, out_sizes, in_sizes);
  record(pending, "all_to_all", in);
  return pending;
}

void ProcessGroup::barrier(const std::string& what) {
  if (!backend_) return;
  // A tiny all-reduce rather than c10d's barrier, so the wait is bounded the same way.
  auto t = torch::zeros({1}, torch::TensorOptions().device(device_));
  all_reduce_(t, ReduceOp::Sum, what);
}

PendingWork ProcessGroup::send(const torch::Tensor& t, int dst, int tag, const std::string& what) {
  TORCH_CHECK(backend_ && dst != rank_, "send of ", what, ": group ", name_, " has no rank ", dst,
              " to send to");
  PendingWork pending{nullptr, on_device(t), t.device(), what};
  std::vector<torch::Tensor> tensors{pending.buffer};
  pending.work = backend_->send(tensors, dst, tag);
  record(pending, "send", pending.buffer);
  return pending;
}

torch::Tensor ProcessGroup::finish(PendingWork& pending) {
  if (pending.work) wait(pending);
  auto result = pending.buffer.defined() ? pending.buffer.to(pending.home) : torch::Tensor();
  pending = PendingWork{};
  return result;
}

void ProcessGroup::recv_(torch::Tensor& t, int src, int tag, const std::string& what) {
  const bool in_place = t.device() == device_ && t.is_contiguous();
  auto pending = post_recv(in_place ? t : torch::empty(t.sizes(), t.options().device(device_)),
                           t.device(), src, tag, what);
  auto received = finish(pending);
  if (!received.is_same(t)) t.copy_(received);
}

PendingWork ProcessGroup::start_recv(const torch::Tensor& like, int src, int tag,
                                     const std::string& what) {
  return post_recv(torch::empty(like.sizes(), like.options().device(device_)), like.device(), src,
                   tag, what);
}

PendingWork ProcessGroup::post_recv(torch::Tensor buffer, torch::Device home, int src, int tag,
                                    const std::string& what) {
  TORCH_CHECK(backend_ && src != rank_, "receive of ", what, ": group ", name_, " has no rank ",
              src, " to receive from");
  PendingWork pending{nullptr, std::move(buffer), home, what};
  std::vector<torch::Tensor> tensors{pending.buffer};
  pending.work = backend_->recv(tensors, src, tag);
  record(pending, "recv", pending.buffer);
  return pending;
}

World::World(WorldInfo info, CommTimeouts timeouts, c10::intrusive_ptr<c10d::Store> store,
             torch::Device device, std::shared_ptr<FlightRecorder> recorder)
    : info_(std::move(info)),
      timeouts_(timeouts),
      store_(std::move(store)),
      device_(device),
      recorder_(std::move(recorder)) {}

std::shared_ptr<World> World::join(const WorldInfo& info, CommTimeouts timeouts,
                                   torch::Device device,
                                   std::shared_ptr<FlightRecorder> recorder) {
  c10::intrusive_ptr<c10d::Store> store;
  if (info.world_size > 1) {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(info.master_port);
    opts.isServer = info.rank == 0 && !info.agent_store;
    opts.numWorkers = info.world_size;
    opts.waitWorkers = false;
    opts.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeouts.init);
    try {
      // Under a launcher's (or torchrun's) agent store, each start of the workers keeps its
      // keys apart, as torch.distributed's rendezvous does.
      store = c10::make_intrusive<c10d::PrefixStore>(
          fmt::format("/worker/attempt_{}", info.restart_count),
          c10::make_intrusive<c10d::TCPStore>(info.master_addr, opts));
    } catch (const std::exception& e) {
      throw CommError(fmt::format(
          "rank {}: rendezvous at {}:{} failed within "
          "comm.init_timeout_seconds = {}: {}",
          info.rank, info.master_addr, info.master_port, timeouts.init.count(), e.what()));
    }
  }
  std::shared_ptr<World> world(new World(info, timeouts, store, device, std::move(recorder)));
  std::vector<int> all(info.world_size);
  for (int r = 0; r < info.world_size; ++r) all[r] = r;
  world->global_ = world->new_group(all, "world");
  world->global_->barrier("initial barrier");
  return world;
}

c10::intrusive_ptr<c10d::Backend> World::make_backend(c10::intrusive_ptr<c10d::Store> store,
                                                      int rank, int size) {
  try {
#ifdef TITAN_CUDA
    if (device_.is_cuda()) {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeouts_.train);
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
    }
#endif
    auto opts = c10d::ProcessGroupGloo::Options::create(
        std::chrono::duration_cast<std::chrono::milliseconds>(timeouts_.train));
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(info_.master_addr)) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("rank {}: creating a process group of {} ranks failed within "
                    "comm.init_timeout_seconds = {}: {}",
                    info_.rank, size, timeouts_.init.count(), e.what()));
  }
}

std::shared_ptr<ProcessGroup> World::new_group(const std::vector<int>& ranks,
                                               const std::string& name) {
  auto it = std::find(ranks.begin(), ranks.end(), info_.rank);
  TORCH_CHECK(it != ranks.end(), "rank ", info_.rank, " asked for group '", name,
              "' without being a member");
  c10::intrusive_ptr<c10d::Backend> backend;
  if (ranks.size() > 1) {
    // The members' store keys: the group's name and ranks, and how many such groups they made.
    std::string key = name;
    for (int r : ranks) key += fmt::format("_{}", r);
    std::string prefix = fmt::format("{}_{}", key, groups_created_[key]++);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
    backend = make_backend(prefixed, static_cast<int>(it - ranks.begin()),
                           static_cast<int>(ranks.size()));
  }
  return std::make_shared<ProcessGroup>(backend, ranks, name, info_.rank, timeouts_.train, device_,
                                        recorder_);
}

}  // namespace titan::distributed
