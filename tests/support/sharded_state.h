// Test helpers for checkpoint tests: FSDP-style dim-0 pieces of full tensors, empty pieces to
// load into, and a process group of one.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "titan/distributed/process_group.h"
#include "titan/distributed/sharded_tensor.h"

namespace titan::testing {

using FullState = std::map<std::string, torch::Tensor>;

/// Rows [begin, end) that rank `rank` of `world` holds of a dim of `rows`: FSDP's torch.chunk
/// split (ceil(rows / world) per rank; the last ranks may get fewer or none).
inline std::pair<int64_t, int64_t> fsdp_rows(int64_t rows, int rank, int world) {
  const int64_t per = (rows + world - 1) / world;
  return {std::min(rows, rank * per), std::min(rows, (rank + 1) * per)};
}

/// Rank `rank`'s pieces of `full` under FSDP over `world` ranks (copies, so the pieces own their
/// memory). Names in `replicated` are whole on every rank, written by `replica_writer` only; 0-dim
/// tensors are replicated too.
inline distributed::ShardedStateDict fsdp_pieces(const FullState& full, int rank, int world,
                                                 const std::set<std::string>& replicated = {},
                                                 int replica_writer = 0) {
  distributed::ShardedStateDict out;
  for (const auto& [name, t] : full) {
    distributed::ShardedTensor p;
    p.global_shape = t.sizes().vec();
    if (t.dim() == 0 || replicated.count(name)) {
      p.local = t.clone();
      p.writer = rank == replica_writer;
    } else {
      auto [begin, end] = fsdp_rows(t.size(0), rank, world);
      p.local = t.narrow(0, begin, end - begin).clone();
      p.row_offset = begin;
    }
    out.emplace(name, std::move(p));
  }
  return out;
}

/// fsdp_pieces with every value zeroed (what a rank loads into).
inline distributed::ShardedStateDict empty_pieces(const FullState& full, int rank, int world) {
  auto out = fsdp_pieces(full, rank, world);
  for (auto& [name, p] : out) p.local.zero_();
  return out;
}

/// Concatenates the ranks' pieces back into full tensors.
inline FullState gather(const std::vector<distributed::ShardedStateDict>& ranks) {
  FullState out;
  for (const auto& [name, first] : ranks.at(0)) {
    if (first.global_shape.empty()) {
      out[name] = first.local;
      continue;
    }
    std::vector<torch::Tensor> parts;
    for (const auto& r : ranks) parts.push_back(r.at(name).local);
    out[name] = torch::cat(parts, 0);
  }
  return out;
}

/// A world of one process (no backend: collectives return at once).
inline std::shared_ptr<distributed::ProcessGroup> group_of_one() {
  return std::make_shared<distributed::ProcessGroup>(
      c10::intrusive_ptr<c10d::Backend>(), std::vector<int>{0}, "world", 0,
      std::chrono::seconds(30));
}

}  // namespace titan::testing
