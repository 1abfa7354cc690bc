// The hand-written SVG charts of training curves: structure, scaling, escaping, panels and the
// marked step.
#include "titan/tools/loss_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace titan::tools {
namespace unit_tools_loss_plot_test {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The points="..." attribute of the n-th polyline.
std::string polyline_points(const std::string& svg, size_t n) {
  static const std::regex points_re("<polyline[^>]* points=\"([^\"]*)\"");
  auto it = std::sregex_iterator(svg.begin(), svg.end(), points_re);
  std::advance(it, n);
  return (*it)[1];
}

TEST(LossPlot, TwoSeriesGiveTwoPolylinesAxesAndALegend) {
  std::vector<PlotSeries> series = {{"base<1>", {{1, 8.0}, {2, 6.0}, {3, 5.0}}},
                                    {"new & shiny", {{1, 8.1}, {2, 6.1}, {3, 5.1}}}};
  std::string svg = plot_svg({{"loss", series}}, "loss");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("base&lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("new &amp; shiny"), std::string::npos);
  EXPECT_NE(svg.find(">step</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss</text>"), std::string::npos);
  EXPECT_GE(count(svg, "text-anchor=\"end\""), 3u);  // y tick labels
  EXPECT_EQ(count(polyline_points(svg, 0), ","), 3u);
}

TEST(LossPlot, PointsStayInsideThePlotAndHigherLossIsHigherUp) {
  std::vector<PlotSeries> series = {{"a", {{10, 3.0}, {20, 2.0}}}};
  std::string points = polyline_points(plot_svg({{"loss", series}}, "t"), 0);
  double x1, y1, x2, y2;
  ASSERT_EQ(std::sscanf(points.c_str(), "%lf,%lf %lf,%lf", &x1, &y1, &x2, &y2), 4);
  EXPECT_LT(x1, x2);
  EXPECT_LT(y1, y2);  // SVG y grows downwards
  for (double x : {x1, x2}) EXPECT_TRUE(x >= 0 && x <= 800);
  for (double y : {y1, y2}) EXPECT_TRUE(y >= 0 && y <= 500);
}

TEST(LossPlot, NonFinitePointsAreLeftOut) {
  std::vector<PlotSeries> series = {{"a", {{1, 3.0}, {2, NAN}, {3, INFINITY}, {4, 2.0}}}};
  std::string points = polyline_points(plot_svg({{"loss", series}}, "t"), 0);
  EXPECT_EQ(count(points, ","), 2u) << points;
  EXPECT_EQ(points.find("nan"), std::string::npos);
  EXPECT_EQ(points.find("inf"), std::string::npos);
}

// Issue 40: titan compare's figure has the loss and the gradient norm on one step axis, and
// the first step past the tolerance marked across both.
TEST(LossPlot, PanelsShareTheStepAxisAndTheMarkerCrossesThem) {
  const std::vector<PlotSeries> loss = {{"a", {{1, 3.0}, {5, 2.0}}}, {"b", {{1, 3.0}, {5, 2.5}}}};
  const std::vector<PlotSeries> norm = {{"a", {{1, 9.0}, {5, 1.0}}}, {"b", {{1, 9.0}, {5, 4.0}}}};
  const std::string svg = plot_svg({{"loss", loss}, {"grad_norm", norm}}, "t", PlotMarker{3, "x"});
  EXPECT_EQ(count(svg, "<polyline"), 4u);
  EXPECT_NE(svg.find(">grad_norm</text>"), std::string::npos);
  double x1, y1, x2, y2, x3, y3, x4, y4;
  ASSERT_EQ(std::sscanf(polyline_points(svg, 0).c_str(), "%lf,%lf %lf,%lf", &x1, &y1, &x2, &y2), 4);
  ASSERT_EQ(std::sscanf(polyline_points(svg, 2).c_str(), "%lf,%lf %lf,%lf", &x3, &y3, &x4, &y4), 4);
  EXPECT_EQ(x1, x3);  // the same steps at the same x in both panels
  EXPECT_EQ(x2, x4);
  EXPECT_LT(std::max(y1, y2), std::min(y3, y4));  // the second panel is below the first
  static const std::regex marker_re(
      "<line x1=\"([0-9.]+)\" y1=\"([0-9.]+)\" x2=\"[0-9.]+\" y2=\"([0-9.]+)\" stroke=\"red\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, marker_re)) << svg;
  EXPECT_NEAR(std::stod(m[1]), (x1 + x2) / 2, 0.1);  // step 3 halfway between 1 and 5
  EXPECT_LE(std::stod(m[2]), std::min(y1, y2));
  EXPECT_GE(std::stod(m[3]), std::max(y3, y4));
}

TEST(LossPlot, ASinglePointStillScales) {
  std::string svg = plot_svg({{"loss", {{"a", {{5, 2.5}}}}}}, "t");
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace unit_tools_loss_plot_test
}  // namespace titan::tools
