// The launchers' own rendezvous across nodes (torchelastic's agent store): node 0's launcher
// hosts a TCP store at RDZV_ENDPOINT that outlives any start of the workers. Every node's
// launcher meets there before each start (a round), posts the first failure of a round, sees
// the others' failures and when every node's workers finished, so that all nodes stop, restart
// or give up together. The workers
// of a round use the same store as clients, under the round's key prefix
// (TORCHELASTIC_USE_AGENT_STORE, TORCHELASTIC_RESTART_COUNT), so that a restarted node never
// meets a stale round's keys.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace titan::distributed {

/// A round's failure as every node sees it: the global rank that failed, its exit code, and
/// whether a restart cannot help whatever MAX_RESTARTS says (the launcher was signalled, or
/// the store was lost).
struct RoundFailure {
  int rank = -1;
  int code = 0;
  bool final = false;
  bool store_lost = false;  // this launcher lost the store (said so): no node posted it
};

class NodeRendezvous {
 public:
  /// Node 0 starts the store at addr:port; the others connect to it within `timeout`. Throws
  /// CommError naming the endpoint and the timeout otherwise.
  NodeRendezvous(const std::string& addr, int port, int node_rank, int nnodes,
                 std::chrono::seconds timeout);

  /// This node arrives for `round`; all_arrived says when every node has.
  void arrive(int round);
  bool all_arrived(int round);

  /// Posts this node's failure unless another node posted first; returns the one that stands.
  RoundFailure post_failure(int round, const RoundFailure& failure);
  /// The round's failure, once some node posted one.
  std::optional<RoundFailure> failure(int round);

  /// This node's launcher knows how the round ended (every node finished, or the failure);
  /// all_acknowledged says when every launcher that connected does (node 0's waits for it
  /// before its store closes).
  void acknowledge(int round);
  bool all_acknowledged(int round);

  /// This node's workers all succeeded; all_finished says when every node's have.
  void finish(int round);
  bool all_finished(int round);

  /// Every node's launcher must say the same `value` of the variable `name` (the first node
  /// to ask sets it); throws ConfigError naming the variable and both values otherwise.
  void expect_same(const std::string& name, const std::string& value);

  int nnodes() const { return nnodes_; }
  std::chrono::seconds timeout() const { return timeout_; }

 private:
  std::string key(int round, const char* what) const;

  c10::intrusive_ptr<c10d::Store> store_;
  int node_rank_;
  int nnodes_;
  std::chrono::seconds timeout_;
};

}  // namespace titan::distributed
