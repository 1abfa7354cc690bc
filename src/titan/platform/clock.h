// Wall-clock intervals for step timings and communication waits.
#pragma once

#include <chrono>

namespace titan::platform {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace titan::platform
