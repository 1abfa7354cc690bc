// A step's live CPU memory as a self-contained SVG chart: the bytes of each category stacked
// over the step's time (ms), the peak marked with what reached it, a legend. Written by hand
// like the loss plot.
#pragma once

#include <string>

#include "titan/tools/memory_timeline.h"

namespace titan::tools {

/// The SVG document (UTF-8 text) of a 900 x 500 px chart of `timeline`.
std::string memory_timeline_svg(const MemoryTimeline& timeline, const std::string& title);

}  // namespace titan::tools
