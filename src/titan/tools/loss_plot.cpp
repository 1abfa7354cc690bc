#include "titan/tools/loss_plot.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/tools/svg_chart.h"

namespace titan::tools {
namespace {

constexpr double kWidth = 800, kPanelHeight = 250;
constexpr double kLeft = 80, kRight = 20, kTop = 40;   // margins around the panels
constexpr double kPlotHeight = 190;                      // of a panel; the rest is its x labels
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};

// The x range shared by every panel.
Range step_range(const std::vector<PlotPanel>& panels) {
  Range xs;
  for (const auto& panel : panels) {
    for (const auto& s : panel.series) {
      for (const auto& [x, y] : s.points) {
        if (std::isfinite(x) && std::isfinite(y)) xs.add(x);
      }
    }
  }
  if (xs.empty()) return {0, 1};
  return xs.hi > xs.lo ? xs : xs.padded(0);
}

double x_pixel(const Range& xs, double x) {
  return kLeft + (x - xs.lo) / (xs.hi - xs.lo) * kPlotWidth;
}

// One panel whose plot area starts `top` px down: grid, ticks, frame, curves, legend.
std::string panel_svg(const PlotPanel& panel, const Range& xs, double top) {
  Range ys;
  for (const auto& s : panel.series) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(x) && std::isfinite(y)) ys.add(y);
    }
  }
  ys = ys.empty() ? Range{0, 1} : ys.padded(0.05);
  auto py = [&](double y) { return top + (ys.hi - y) / (ys.hi - ys.lo) * kPlotHeight; };
  std::string svg;
  for (double t : ticks(xs, std::max(1.0, nice_step(xs, 8)))) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n"
        "<line x1=\"{0:.1f}\" y1=\"{2}\" x2=\"{0:.1f}\" y2=\"{3}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{4}\" text-anchor=\"middle\">{5:g}</text>\n",
        x_pixel(xs, t), top, top + kPlotHeight, top + kPlotHeight + 5, top + kPlotHeight + 20, t);
  }
  for (double t : ticks(ys, nice_step(ys, 5))) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e0e0e0\"/>\n"
        "<line x1=\"{3}\" y1=\"{1:.1f}\" x2=\"{0}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n"
        "<text x=\"{4}\" y=\"{5:.1f}\" text-anchor=\"end\">{6:.6g}</text>\n",
        kLeft, py(t), kLeft + kPlotWidth, kLeft - 5, kLeft - 8, py(t) + 4, t);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text transform=\"translate(20,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, top, kPlotWidth, kPlotHeight, top + kPlotHeight / 2, xml_escape(panel.y_label));
  for (size_t i = 0; i < panel.series.size(); ++i) {
    std::string points;
    for (const auto& [x, y] : panel.series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      points += fmt::format("{}{:.2f},{:.2f}", points.empty() ? "" : " ", x_pixel(xs, x), py(y));
    }
    const char* dash = i == 0 ? "" : " stroke-dasharray=\"6 4\"";
    const char* color = kColors[i % std::size(kColors)];
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", color,
        dash, points);
    const double ly = top + 20 + 18 * i, lx = kLeft + kPlotWidth - 220;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        lx, ly, lx + 30, ly, color, dash, lx + 38, ly + 4, xml_escape(panel.series[i].label));
  }
  return svg;
}

}  // namespace

std::string plot_svg(const std::vector<PlotPanel>& panels, const std::string& title,
                     const std::optional<PlotMarker>& marker) {
  const Range xs = step_range(panels);
  const double height = kTop + kPanelHeight * static_cast<double>(panels.size()) + 20;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, height, kLeft + kPlotWidth / 2, xml_escape(title));
  for (size_t i = 0; i < panels.size(); ++i) {
    svg += panel_svg(panels[i], xs, kTop + kPanelHeight * static_cast<double>(i));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n",
                     kLeft + kPlotWidth / 2, height - 8);
  if (marker) {  // from the first plot's top to the last one's bottom, labelled above
    const double x = x_pixel(xs, marker->step);
    const double bottom = kTop + kPanelHeight * static_cast<double>(panels.size() - 1) + kPlotHeight;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"red\" "
        "stroke-width=\"1.5\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\" fill=\"red\">{4}</text>\n",
        x, kTop, bottom, kTop - 4, xml_escape(marker->label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace titan::tools
