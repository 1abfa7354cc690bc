// Memory figures for the step line. On a GPU, CUDA's caching allocator's peaks (TorchTitan's
// DeviceMemoryMonitor); on the CPU, the peak of live tensor bytes (a counting allocator around
// LibTorch's CPU allocator, the counterpart of max_active) and the process's peak resident set
// (VmHWM) as the reserved bytes.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace titan::platform {

/// Routes every later CPU tensor allocation through a counting allocator. Idempotent; call
/// before building the model. Tensors allocated earlier are not counted.
void enable_memory_counting();

/// Bytes of CPU tensors alive now (0 before enable_memory_counting()).
int64_t live_tensor_bytes();
/// Highest live_tensor_bytes() since the last reset_peak_tensor_bytes().
int64_t peak_tensor_bytes();
/// Starts a new peak window at the current live bytes.
void reset_peak_tensor_bytes();

/// Peak resident set size of this process in bytes (0 if unknown).
int64_t peak_rss_bytes();

struct MemoryPeaks {
  int64_t max_active = 0;    // bytes of live tensors at the peak
  int64_t max_reserved = 0;  // bytes the allocator held from the system at the peak
  int64_t alloc_retries = 0; // CUDA: allocations that had to free cached blocks and retry
  int64_t ooms = 0;          // CUDA: out-of-memory errors the allocator raised
};

/// Peaks on `device` since the last reset_memory_peaks(device). On the CPU, max_reserved is
/// the process's peak RSS over its whole life.
MemoryPeaks memory_peaks(const torch::Device& device);
void reset_memory_peaks(const torch::Device& device);

}  // namespace titan::platform
