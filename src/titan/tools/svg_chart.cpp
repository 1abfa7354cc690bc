#include "titan/tools/svg_chart.h"

namespace titan::tools {

Range Range::padded(double fraction) const {
  double span = hi - lo;
  double pad = span > 0 ? span * fraction : std::max(std::abs(lo) * 0.05, 0.5);
  return {lo - pad, hi + pad};
}

double nice_step(const Range& r, int target) {
  double raw = (r.hi - r.lo) / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / magnitude;
  double factor = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return factor * magnitude;
}

std::vector<double> ticks(const Range& r, double step) {
  std::vector<double> out;
  for (double t = std::ceil(r.lo / step) * step; t <= r.hi + step * 1e-9; t += step) {
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return out;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace titan::tools
