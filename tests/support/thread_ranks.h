// Test helper: a world of `n` ranks as threads of this process, each joined through its own
// c10d store client and Gloo group, for testing collectives against single-process references.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "support/process.h"
#include "titan/distributed/process_group.h"
#include "titan/errors.h"

namespace titan::testing {

/// Runs body(rank, world) on `n` threads, each a rank of one world whose collectives wait at
/// most `train_timeout`; rethrows the first exception a rank threw, preferring one that is not
/// a CommError (a rank that failed on its own over the peers that saw it go).
inline void run_thread_ranks(int n, const std::function<void(int, distributed::World&)>& body,
                             std::chrono::seconds train_timeout = std::chrono::seconds(60)) {
  const int port = free_port();
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        distributed::WorldInfo info;
        info.rank = r;
        info.world_size = n;
        info.local_rank = r;
        info.local_world_size = n;
        info.master_port = port;
        auto world = distributed::World::join(info, {std::chrono::seconds(60), train_timeout});
        body(r, *world);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::exception_ptr comm_error;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CommError&) {
      if (!comm_error) comm_error = e;
    }
  }
  if (comm_error) std::rethrow_exception(comm_error);
}

}  // namespace titan::testing
