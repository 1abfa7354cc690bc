#include "titan/tools/memory_timeline_svg.h"

#include <fmt/format.h>

#include "titan/tools/svg_chart.h"

namespace titan::tools {
namespace {

using platform::MemoryCategory;

constexpr double kChartWidth = 900, kChartHeight = 500;
constexpr double kChartLeft = 80, kChartRight = 200, kChartTop = 40,
                 kChartBottom = 60;  // the legend on the right

struct ChartLayer {
  MemoryCategory category;
  const char* color;
};
// Bottom to top: what lives across steps first.
constexpr ChartLayer kChartLayers[] = {
    {MemoryCategory::Parameters, "#1f77b4"},     {MemoryCategory::Gradients, "#ff7f0e"},
    {MemoryCategory::OptimizerState, "#2ca02c"}, {MemoryCategory::Communication, "#9467bd"},
    {MemoryCategory::Activations, "#d62728"},    {MemoryCategory::ActivationGradients, "#e377c2"},
    {MemoryCategory::Loss, "#8c564b"},           {MemoryCategory::Other, "#7f7f7f"},
};

}  // namespace

std::string memory_timeline_svg(const MemoryTimeline& timeline, const std::string& title) {
  std::vector<MemoryState> points{timeline.start};
  points.insert(points.end(), timeline.samples.begin(), timeline.samples.end());
  points.push_back(timeline.end);
  const bool gib = timeline.peak.total() >= (int64_t{2} << 30);
  const double unit = gib ? double(1 << 30) : double(1 << 20);
  Range xs{0, points.back().seconds * 1e3}, ys{0, timeline.peak.total() / unit};
  if (xs.hi <= 0) xs.hi = 1;
  if (ys.hi <= 0) ys.hi = 1;
  ys.hi *= 1.08;  // room for the peak's label
  const double plot_w = kChartWidth - kChartLeft - kChartRight,
               plot_h = kChartHeight - kChartTop - kChartBottom;
  auto px = [&](double ms) { return kChartLeft + ms / xs.hi * plot_w; };
  auto py = [&](double v) { return kChartTop + (ys.hi - v) / ys.hi * plot_h; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kChartWidth, kChartHeight, kChartLeft + plot_w / 2, xml_escape("Live CPU memory, " + title));
  // Stacked areas: each layer between the sum of those below it and that plus its own bytes.
  std::vector<double> below(points.size(), 0.0);
  for (const auto& layer : kChartLayers) {
    std::string upper, lower;
    for (size_t i = 0; i < points.size(); ++i) {
      const double x = px(points[i].seconds * 1e3);
      const double top = below[i] + points[i].bytes(layer.category) / unit;
      upper += fmt::format("{:.1f},{:.1f} ", x, py(top));
      lower = fmt::format("{:.1f},{:.1f} ", x, py(below[i])) + lower;
      below[i] = top;
    }
    svg += fmt::format(
        "<polygon fill=\"{}\" fill-opacity=\"0.85\" stroke=\"none\" points=\"{}{}\"/>\n",
        layer.color, upper, lower);
  }
  // Axes.
  for (double t : ticks(xs, nice_step(xs, 8))) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(t), kChartTop + plot_h, kChartTop + plot_h + 5, kChartTop + plot_h + 20, t);
  }
  for (double t : ticks(ys, nice_step(ys, 6))) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"black\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kChartLeft - 5, py(t), kChartLeft, kChartLeft - 8, py(t) + 4, t);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time in the step (ms)</text>\n"
      "<text transform=\"translate(20,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kChartLeft, kChartTop, plot_w, plot_h, kChartLeft + plot_w / 2, kChartHeight - 15,
      kChartTop + plot_h / 2, gib ? "GiB" : "MiB");
  // The peak, and the legend.
  const double peak_x = px(timeline.peak.seconds * 1e3);
  svg += fmt::format(
      "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\" "
      "stroke-dasharray=\"4 3\"/>\n"
      "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
      peak_x, kChartTop, kChartTop + plot_h, kChartTop - 4 + 0.04 * plot_h,
      xml_escape(fmt::format("peak {:.1f} {} ({})", timeline.peak.total() / unit,
                             gib ? "GiB" : "MiB", describe(timeline.peak_tag))));
  for (size_t i = 0; i < std::size(kChartLayers); ++i) {
    const double x = kChartLeft + plot_w + 15, y = kChartTop + 10 + 20 * i;
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>\n"
        "<text x=\"{}\" y=\"{}\">{} {:.1f}</text>\n",
        x, y, kChartLayers[i].color, x + 20, y + 11,
        platform::memory_category_name(kChartLayers[i].category),
        timeline.peak.bytes(kChartLayers[i].category) / unit);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace titan::tools
