#include "titan/platform/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "titan/platform/logging.h"

namespace titan::platform {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string what, double total, std::string unit, double interval_s)
    : what_(std::move(what)), total_(total), unit_(std::move(unit)), interval_s_(interval_s) {}

void Progress::update(double done) {
  const double spent = seconds_since(start_);
  if (spent - last_line_s_ < interval_s_ || total_ <= 0) return;
  last_line_s_ = spent;
  const double fraction = std::min(done / total_, 1.0);
  log::info("{}: {:.3g}/{:.3g} {} ({:.0f}%), {} spent{}", what_, done, total_, unit_,
            100.0 * fraction, format_duration(spent),
            fraction > 0 ? ", about " + format_duration(spent * (1 - fraction) / fraction) + " left"
                         : std::string());
}

}  // namespace titan::platform
