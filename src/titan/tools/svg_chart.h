// What titan's hand-written SVG charts share (the loss plot, the memory timeline): value ranges,
// "nice" tick spacings and XML escaping.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace titan::tools {

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();

  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return lo > hi; }
  /// Widens by `fraction` of the span each side; a degenerate (single-value) range by 5% of
  /// its value (at least 0.5), so it can be scaled.
  Range padded(double fraction) const;
};

/// A tick spacing of 1, 2 or 5 x 10^k giving about `target` intervals over `r`.
double nice_step(const Range& r, int target);
/// The multiples of `step` inside `r`.
std::vector<double> ticks(const Range& r, double step);
/// `text` with &, <, > and " escaped.
std::string xml_escape(const std::string& text);

}  // namespace titan::tools
