// Memory snapshots (TorchTitan's profiling.enable_memory_snapshot): at every profile_freq-th
// step, and when an allocation fails, each rank writes what its memory held to
// <dump_folder>/<save_memory_snapshot_folder>/iteration_<step>/ (iteration_<step>_exit/ on a
// failure).
// - On the CPU: rank<r>_memory_snapshot.json, the peak live bytes of the step by category
//   (parameters, gradients, optimizer state, activations and activation gradients per block,
//   communication buffers, loss; platform/memory.h) and what reached it, with the start and end
//   of the step; rank<r>_memory_timeline.svg, the live bytes by category over the step. On a
//   failure outside a recorded step, the bytes alive by category when it failed.
// - On a GPU: rank<r>_memory_snapshot.pickle, the CUDA caching allocator's history, as
//   TorchTitan writes it (open it in https://pytorch.org/memory_viz).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::tools {

class MemorySnapshot {
 public:
  /// Does nothing unless config.enable_memory_snapshot; snapshots go under `folder`.
  MemorySnapshot(const config::ProfilingSection& config, std::string folder, int rank,
                 torch::Device device);
  MemorySnapshot(const MemorySnapshot&) = delete;
  MemorySnapshot& operator=(const MemorySnapshot&) = delete;
  ~MemorySnapshot();

  bool enabled() const { return config_.enable_memory_snapshot; }
  /// Before step `step`'s work: starts recording a profile_freq-th step.
  void step_begin(int64_t step);
  /// After the optimizer's step (when enabled()): the parameters, their gradients and the
  /// optimizer's state count as such from their allocation on.
  void classify(const std::vector<torch::Tensor>& params,
                const std::vector<torch::Tensor>& optimizer_state);
  /// After step `step`'s work and checkpoint save: writes a recorded step's snapshot.
  void step_end(int64_t step);
  /// An allocation failed in step `step` with `error`: writes what is known.
  void allocation_failed(int64_t step, const std::string& error);

 private:
  class Recorder;
  std::string step_folder(int64_t step, bool failed) const;

  config::ProfilingSection config_;
  std::string folder_;
  int rank_;
  torch::Device device_;
  std::unique_ptr<Recorder> recorder_;  // while a CPU step records
};

}  // namespace titan::tools
