// Memory figures for the step line. On CPU: the process's peak resident set (VmHWM) and the
// machine's RAM; a counting allocator for live tensor bytes comes with FSDP's accounting.
#pragma once

#include <cstdint>

namespace titan::platform {

/// Peak resident set size of this process in bytes (0 if unknown).
int64_t peak_rss_bytes();
/// Physical memory of the machine in bytes.
int64_t total_memory_bytes();

}  // namespace titan::platform
