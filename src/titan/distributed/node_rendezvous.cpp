#include "titan/distributed/node_rendezvous.h"

#include <fmt/format.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <sstream>

#include "titan/distributed/process_group.h"
#include "titan/errors.h"

namespace titan::distributed {
namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::string encode(const RoundFailure& f) {
  return fmt::format("{} {} {}", f.rank, f.code, f.final ? 1 : 0);
}

RoundFailure decode(const std::vector<uint8_t>& value) {
  std::istringstream in(std::string(value.begin(), value.end()));
  RoundFailure f;
  int final = 0;
  in >> f.rank >> f.code >> final;
  f.final = final != 0;
  return f;
}

}  // namespace

NodeRendezvous::NodeRendezvous(const std::string& addr, int port, int node_rank, int nnodes,
                               std::chrono::seconds timeout)
    : node_rank_(node_rank), nnodes_(nnodes), timeout_(timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = node_rank == 0;
  opts.waitWorkers = false;
  // A client connects in tries of at most 5 s until the deadline: one long try backs off past
  // it (c10d's retry delays grow with the try's timeout).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    opts.timeout = std::max(std::chrono::milliseconds(100),
                            std::min<std::chrono::milliseconds>(left, std::chrono::seconds(5)));
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(addr, opts);
      break;
    } catch (const std::exception& e) {
      if (opts.isServer || std::chrono::steady_clock::now() >= deadline) {
        throw CommError(fmt::format("titan launch (node {}): the launchers' rendezvous at {}:{} "
                                    "failed within comm.init_timeout_seconds = {}: {}",
                                    node_rank, addr, port, timeout.count(), message_of(e)));
      }
    }
  }
  store_->add("titan_launch/connected", 1);
}

std::string NodeRendezvous::key(int round, const char* what) const {
  return fmt::format("titan_launch/round_{}/{}", round, what);
}

void NodeRendezvous::arrive(int round) {
  if (store_->add(key(round, "arrived"), 1) == nnodes_) {
    store_->set(key(round, "all_arrived"), bytes_of("1"));
  }
}

bool NodeRendezvous::all_arrived(int round) { return store_->check({key(round, "all_arrived")}); }

RoundFailure NodeRendezvous::post_failure(int round, const RoundFailure& failure) {
  return decode(store_->compareSet(key(round, "failure"), {}, bytes_of(encode(failure))));
}

std::optional<RoundFailure> NodeRendezvous::failure(int round) {
  const auto k = key(round, "failure");
  if (!store_->check({k})) return std::nullopt;
  return decode(store_->get(k));
}

void NodeRendezvous::acknowledge(int round) { store_->add(key(round, "acknowledged"), 1); }

bool NodeRendezvous::all_acknowledged(int round) {
  return store_->add(key(round, "acknowledged"), 0) >= store_->add("titan_launch/connected", 0);
}

void NodeRendezvous::expect_same(const std::string& name, const std::string& value) {
  const auto stored = store_->compareSet("titan_launch/" + name, {}, bytes_of(value));
  const std::string first(stored.begin(), stored.end());
  if (first != value) {
    throw ConfigError(fmt::format("{}={} on node {} but {} on another node: every node's launcher "
                                  "needs the same value",
                                  name, value, node_rank_, first));
  }
}

void NodeRendezvous::finish(int round) { store_->add(key(round, "finished"), 1); }

bool NodeRendezvous::all_finished(int round) {
  return store_->add(key(round, "finished"), 0) == nnodes_;
}

}  // namespace titan::distributed
