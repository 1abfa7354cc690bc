// Wall-clock intervals for step timings and communication waits, and local-time stamps for
// output folders.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace titan::platform {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The local time now in strftime's `format` (e.g. "%Y%m%d-%H%M" for TorchTitan's folders).
inline std::string local_time_stamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), format, &local);
  return stamp;
}

}  // namespace titan::platform
