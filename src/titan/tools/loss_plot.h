// Loss curves as a self-contained SVG line chart (axes with ticks, one polyline per run, a
// legend), written by hand so that `titan compare` needs no plotting library.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace titan::tools {

/// One curve: (step, loss) points in ascending step order, named in the legend.
struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// The SVG document (UTF-8 text) of a 800 x 500 px chart: x = step, y = loss, axes scaled to
/// the finite points of all series with "nice" (1, 2, 5 x 10^k) ticks. Non-finite points are
/// left out of the curves; labels are XML-escaped. The first series is drawn solid, the others
/// dashed, so identical curves stay distinguishable.
std::string loss_plot_svg(const std::vector<PlotSeries>& series, const std::string& title);

}  // namespace titan::tools
