#include "titan/tools/trace_pieces.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace titan::tools {
namespace {

constexpr const char* kEnds = " ends";
// Piece tracks' thread ids: the thread's own id plus this.
constexpr int64_t kTrackOffset = 1'000'000'000;

// Whether `name` is a piece's: "output", "loss" or "layers.<digits>".
bool is_piece(const std::string& name) {
  if (name == "output" || name == "loss") return true;
  const std::string prefix = "layers.";
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(name.begin() + prefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The marker kind of event `e`: 1 "<piece> backward" (it begins), 2 "<piece> backward ends",
// 0 neither.
int marker(const nlohmann::json& e) {
  if (e.value("ph", "") != "X" || e.value("cat", "") != "user_annotation") return 0;
  std::string name = e.value("name", "");
  int kind = 1;
  if (name.size() > std::strlen(kEnds) &&
      name.compare(name.size() - std::strlen(kEnds), std::string::npos, kEnds) == 0) {
    name.resize(name.size() - std::strlen(kEnds));
    kind = 2;
  }
  const std::string backward = " backward";
  if (name.size() <= backward.size() ||
      name.compare(name.size() - backward.size(), std::string::npos, backward) != 0) {
    return 0;
  }
  return is_piece(name.substr(0, name.size() - backward.size())) ? kind : 0;
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
      auto& begins = open[name.substr(0, name.size() - std::string(kEnds).size())];
      if (begins.empty()) continue;
      const auto* begin = begins.back();
      begins.pop_back();
      const double start = (*begin)["ts"].get<double>();
      const double end = (*m)["ts"].get<double>() + (*m)["dur"].get<double>();
      const auto& tid = (*m)["tid"];
      const nlohmann::json track = tid.is_number_integer()
                                       ? nlohmann::json(tid.get<int64_t>() + kTrackOffset)
                                       : nlohmann::json(tid.dump() + " (model pieces)");
      spans.push_back({{"ph", "X"},
                       {"cat", "user_annotation"},
                       {"name", (*begin)["name"]},
                       {"pid", (*m)["pid"]},
                       {"tid", track},
                       {"ts", start},
                       {"dur", end - start}});
      tracks[thread] = {(*m)["pid"], track};
    }
  }
  nlohmann::json kept = nlohmann::json::array();
  for (auto& e : events) {
    if (!marker(e)) kept.push_back(std::move(e));
  }
  for (auto& s : spans) kept.push_back(std::move(s));
  for (const auto& [thread, track] : tracks) {
    kept.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", track.first},
                    {"tid", track.second},
                    {"args", {{"name", "model pieces (backward), thread " + thread.second}}}});
  }
  events = std::move(kept);
}

}  // namespace titan::tools
