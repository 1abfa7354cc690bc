// Progress lines for work that can take a while (tokenizing a dataset, a long validation):
// silent for the first few seconds, then one log line every few seconds with the amount done,
// the time spent and an estimate of the time left.
#pragma once

#include <string>

#include "titan/platform/clock.h"

namespace titan::platform {

/// "42s", "3m05s", "1h02m": a duration for a console line.
std::string format_duration(double seconds);

class Progress {
 public:
  /// `what` names the work ("tokenizing kjv_bible"), `total` its size in `unit`s (> 0).
  Progress(std::string what, double total, std::string unit, double interval_s = 5.0);

  /// `done` of the total units so far: logs "<what>: <done>/<total> <unit> (p%), <t> spent,
  /// about <t> left" when interval_s has passed since the start or the last line.
  void update(double done);

 private:
  std::string what_;
  double total_;
  std::string unit_;
  double interval_s_;
  Clock::time_point start_ = Clock::now();
  double last_line_s_ = 0;
};

}  // namespace titan::platform
