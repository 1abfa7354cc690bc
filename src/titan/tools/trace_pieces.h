// The model pieces' backward spans in a profiler trace. A piece's backward starts in one
// autograd node and ends in another (models/common/block_trace.h), so a profiler range could
// not nest inside both; each leaves two short ranges instead, "<piece> backward" and
// "<piece> backward ends". This joins each pair into one span "<piece> backward" from the
// first's start to the second's end, on a track of its own beside the thread that ran it
// ("model pieces (backward), thread <tid>"), so every track of the trace stays nested.
#pragma once

#include <nlohmann/json.hpp>

namespace titan::tools {

/// Rewrites `trace` (Chrome trace JSON with "traceEvents") in place.
void join_backward_spans(nlohmann::json& trace);

}  // namespace titan::tools
