// Training curves as a self-contained SVG (axes with ticks, one polyline per run, a legend):
// panels stacked over one step axis (`titan compare` draws the loss and the gradient norm),
// written by hand so that titan needs no plotting library.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace titan::tools {

/// One curve: (step, value) points in ascending step order, named in the legend.
struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// One chart of the figure: what its y axis shows ("loss") and its curves.
struct PlotPanel {
  std::string y_label;
  std::vector<PlotSeries> series;
};

/// A step marked across every panel by a red vertical line with `label` (the first step past
/// the tolerance).
struct PlotMarker {
  double step = 0;
  std::string label;
};

/// The SVG document (UTF-8 text), 800 px wide, 250 px per panel: x = step (one range for all
/// panels), each panel's y axis scaled to its finite points with "nice" (1, 2, 5 x 10^k)
/// ticks. Non-finite points are left out of the curves; labels are XML-escaped. In each panel
/// the first series is drawn solid, the others dashed, so identical curves stay distinguishable.
std::string plot_svg(const std::vector<PlotPanel>& panels, const std::string& title,
                     const std::optional<PlotMarker>& marker = std::nullopt);

}  // namespace titan::tools
