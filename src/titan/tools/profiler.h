// The Kineto profiler over training steps (TorchTitan's profiling.enable_profiling). Every
// profile_freq steps it prepares during the profiler_warmup steps before the window, records the
// last profiler_active steps of it, and writes each rank's Chrome trace to
// <dump_folder>/<save_traces_folder>/iteration_<step>/rank<rank>_trace.json (open it in Perfetto
// or chrome://tracing). A trace holds the operators and these ranges:
// - "data loading", "optimizer", "checkpoint save";
// - "layers.<id> forward" (a block's compute, inside its FSDP gather), "layers.<id> backward"
//   (the whole block, its gradient reduce-scatter included), "output forward/backward" (final
//   norm and logits) and "loss forward/backward" (models/common/block_trace.h); under
//   activation checkpointing a block's recompute is a second "forward" inside its backward;
// - every collective's wait on the calling thread, "<op> [<group>] <bytes> B: <what>" (the
//   communication compute did not hide), and each collective from issue to completion on the
//   backend's thread (c10d's "gloo:..." ranges; NCCL's kernels on a GPU), which shows what
//   compute hid of them.
#pragma once

#include <cstdint>
#include <string>

#include "titan/config/job_config.h"

namespace titan::tools {

class Profiler {
 public:
  /// Does nothing unless config.enable_profiling; traces go under `trace_folder`.
  Profiler(const config::ProfilingSection& config, std::string trace_folder, int rank,
           bool cuda);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  /// Stops a recording left running (a failed step), writing nothing.
  ~Profiler();

  /// Before step `step`'s work: prepares at the window's first warmup step, starts recording at
  /// its first active step (a run resumed inside a window prepares there).
  void step_begin(int64_t step);
  /// After step `step`'s work: at the window's last step, stops and writes the trace.
  void step_end(int64_t step);

 private:
  /// 1..profile_freq: where `step` sits in its window.
  int64_t phase(int64_t step) const;
  void prepare();

  config::ProfilingSection config_;
  std::string trace_folder_;
  int rank_;
  bool cuda_;
  bool prepared_ = false;
  bool recording_ = false;
};

/// Start check: profiling.profile_freq must leave room for profiler_warmup + profiler_active;
/// throws ConfigError naming the keys.
void check_profiling(const config::ProfilingSection& config);

}  // namespace titan::tools
