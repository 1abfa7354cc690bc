#include "titan/tools/trace_pieces.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace titan::tools {
namespace {

constexpr const char* kBegins = " backward";
constexpr const char* kEnds = " backward ends";
// Piece tracks' thread ids: the thread's own id plus this.
constexpr int64_t kTrackOffset = 1'000'000'000;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The marker kind of event `e`: 1 a piece's backward begins, 2 it ends, 0 neither.
int marker(const nlohmann::json& e) {
  if (e.value("ph", "") != "X" || e.value("cat", "") != "user_annotation") return 0;
  const std::string name = e.value("name", "");
  if (ends_with(name, kEnds)) return 2;
  return ends_with(name, kBegins) ? 1 : 0;
}

}  // namespace

void join_backward_spans(nlohmann::json& trace) {
  auto& events = trace["traceEvents"];
  // Markers by thread, in time order.
  // pid and tid as Kineto writes them: numbers for threads (strings for its own tracks).
  using Thread = std::pair<std::string, std::string>;  // their JSON texts
  std::map<Thread, std::vector<const nlohmann::json*>> by_thread;
  for (const auto& e : events) {
    if (marker(e)) by_thread[{e["pid"].dump(), e["tid"].dump()}].push_back(&e);
  }
  nlohmann::json spans = nlohmann::json::array();
  std::map<Thread, std::pair<nlohmann::json, nlohmann::json>> tracks;  // -> pid, piece tid
  for (auto& [thread, markers] : by_thread) {
    std::stable_sort(markers.begin(), markers.end(), [](const auto* a, const auto* b) {
      return (*a)["ts"].template get<double>() < (*b)["ts"].template get<double>();
    });
    std::map<std::string, std::vector<const nlohmann::json*>> open;  // piece -> begins
    for (const auto* m : markers) {
      const std::string name = (*m)["name"].get<std::string>();
      if (marker(*m) == 1) {
        open[name].push_back(m);
        continue;
      }
      auto& begins = open[name.substr(0, name.size() - std::string(kEnds).size()) + kBegins];
      if (begins.empty()) continue;
      const auto* begin = begins.back();
      begins.pop_back();
      const double start = (*begin)["ts"].get<double>();
      const double end = (*m)["ts"].get<double>() + (*m)["dur"].get<double>();
      const auto& tid = (*m)["tid"];
      const nlohmann::json track = tid.is_number_integer()
                                       ? nlohmann::json(tid.get<int64_t>() + kTrackOffset)
                                       : nlohmann::json(tid.dump() + " (model pieces)");
      spans.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", (*begin)["name"]},
                       {"pid", (*m)["pid"]}, {"tid", track}, {"ts", start}, {"dur", end - start}});
      tracks[thread] = {(*m)["pid"], track};
    }
  }
  nlohmann::json kept = nlohmann::json::array();
  for (auto& e : events) {
    if (!marker(e)) kept.push_back(std::move(e));
  }
  for (auto& s : spans) kept.push_back(std::move(s));
  for (const auto& [thread, track] : tracks) {
    kept.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", track.first},
                    {"tid", track.second},
                    {"args", {{"name", "model pieces (backward), thread " + thread.second}}}});
  }
  events = std::move(kept);
}

}  // namespace titan::tools
