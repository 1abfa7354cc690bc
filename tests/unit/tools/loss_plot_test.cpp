// The hand-written SVG loss chart: structure, scaling and escaping.
#include "titan/tools/loss_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace titan::tools {
namespace {

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
  std::string svg = loss_plot_svg(series, "loss");
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
  std::string points = polyline_points(loss_plot_svg(series, "t"), 0);
  double x1, y1, x2, y2;
  ASSERT_EQ(std::sscanf(points.c_str(), "%lf,%lf %lf,%lf", &x1, &y1, &x2, &y2), 4);
  EXPECT_LT(x1, x2);
  EXPECT_LT(y1, y2);  // SVG y grows downwards
  for (double x : {x1, x2}) EXPECT_TRUE(x >= 0 && x <= 800);
  for (double y : {y1, y2}) EXPECT_TRUE(y >= 0 && y <= 500);
}

TEST(LossPlot, NonFinitePointsAreLeftOut) {
  std::vector<PlotSeries> series = {{"a", {{1, 3.0}, {2, NAN}, {3, INFINITY}, {4, 2.0}}}};
  std::string points = polyline_points(loss_plot_svg(series, "t"), 0);
  EXPECT_EQ(count(points, ","), 2u) << points;
  EXPECT_EQ(points.find("nan"), std::string::npos);
  EXPECT_EQ(points.find("inf"), std::string::npos);
}

TEST(LossPlot, ASinglePointStillScales) {
  std::string svg = loss_plot_svg({{"a", {{5, 2.5}}}}, "t");
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace titan::tools
