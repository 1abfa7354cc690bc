#include "titan/tools/loss_plot.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/tools/svg_chart.h"

namespace titan::tools {
namespace {

constexpr double kWidth = 800, kHeight = 500;
constexpr double kLeft = 80, kRight = 20, kTop = 40, kBottom = 60;  // margins around the plot
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

}  // namespace

std::string loss_plot_svg(const std::vector<PlotSeries>& series, const std::string& title) {
  Range xs, ys;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x) && std::isfinite(y)) xs.add(x), ys.add(y);
    }
  }
  if (xs.empty()) xs = {0, 1}, ys = {0, 1};
  xs = xs.hi > xs.lo ? xs : xs.padded(0);
  ys = ys.padded(0.05);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xs.lo) / (xs.hi - xs.lo) * plot_w; };
  auto py = [&](double y) { return kTop + (ys.hi - y) / (ys.hi - ys.lo) * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft + plot_w / 2, xml_escape(title));
  // Axes: grid line and label at each tick, then the frame.
  double x_step = std::max(1.0, nice_step(xs, 8));
  for (double t : ticks(xs, x_step)) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n"
        "<line x1=\"{0:.1f}\" y1=\"{2}\" x2=\"{0:.1f}\" y2=\"{3}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{4}\" text-anchor=\"middle\">{5:g}</text>\n",
        px(t), kTop, kTop + plot_h, kTop + plot_h + 5, kTop + plot_h + 20, t);
  }
  for (double t : ticks(ys, nice_step(ys, 6))) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e0e0e0\"/>\n"
        "<line x1=\"{3}\" y1=\"{1:.1f}\" x2=\"{0}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n"
        "<text x=\"{4}\" y=\"{5:.1f}\" text-anchor=\"end\">{6:.6g}</text>\n",
        kLeft, py(t), kLeft + plot_w, kLeft - 5, kLeft - 8, py(t) + 4, t);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n"
      "<text transform=\"translate(20,{}) rotate(-90)\" text-anchor=\"middle\">loss</text>\n",
      kLeft, kTop, plot_w, plot_h, kLeft + plot_w / 2, kHeight - 15, kTop + plot_h / 2);
  // Curves, then the legend in the top-right corner of the plot.
  for (size_t i = 0; i < series.size(); ++i) {
    std::string points;
    for (const auto& [x, y] : series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      points += fmt::format("{}{:.2f},{:.2f}", points.empty() ? "" : " ", px(x), py(y));
    }
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n",
        kColors[i % std::size(kColors)], i == 0 ? "" : " stroke-dasharray=\"6 4\"", points);
  }
  for (size_t i = 0; i < series.size(); ++i) {
    double y = kTop + 20 + 18 * i, x = kLeft + plot_w - 220;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        x, y, x + 30, y, kColors[i % std::size(kColors)],
        i == 0 ? "" : " stroke-dasharray=\"6 4\"", x + 38, y + 4, xml_escape(series[i].label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace titan::tools
