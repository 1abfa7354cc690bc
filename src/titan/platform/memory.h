// Memory figures for the step line: the peak of live CPU tensor bytes (a counting allocator
// around LibTorch's CPU allocator, like TorchTitan's max_active on CUDA), the process's peak
// resident set (VmHWM), and the machine's RAM.
#pragma once

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
/// Physical memory of the machine in bytes.
int64_t total_memory_bytes();

}  // namespace titan::platform
