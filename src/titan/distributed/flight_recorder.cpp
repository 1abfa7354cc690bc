#include "titan/distributed/flight_recorder.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

namespace titan::distributed {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

json to_json(const CollectiveRecord& r) {
  return {{"id", r.id},       {"group", r.group}, {"ranks", r.ranks}, {"seq", r.seq},
          {"op", r.op},       {"what", r.what},   {"shape", r.shape}, {"dtype", r.dtype},
          {"start", r.start}, {"end", r.end},     {"state", r.state}};
}

CollectiveRecord from_json(const json& j) {
  CollectiveRecord r;
  r.id = j.at("id");
  r.group = j.at("group");
  r.ranks = j.at("ranks").get<std::vector<int>>();
  r.seq = j.at("seq");
  r.op = j.at("op");
  r.what = j.at("what");
  r.start = j.at("start");
  r.end = j.at("end");
  r.state = j.at("state");
  return r;
}

std::string describe(const CollectiveRecord& r) {
  return fmt::format("#{} {} '{}' on group '{}' ({})", r.seq, r.op, r.what, r.group, r.state);
}

// Written by the SIGUSR1 handler, read by the dumping thread.
int g_dump_pipe[2] = {-1, -1};

void on_dump_signal(int) {
  const char c = 1;
  [[maybe_unused]] auto n = write(g_dump_pipe[1], &c, 1);
}

}  // namespace

FlightRecorder::FlightRecorder(int rank, int64_t capacity, fs::path folder)
    : rank_(rank), capacity_(capacity), path_(folder / fmt::format("rank_{}.json", rank)) {}

int64_t FlightRecorder::start(const std::string& group, const std::vector<int>& ranks,
                              int64_t seq, const char* op, const std::string& what,
                              const torch::Tensor& t) {
  if (!enabled()) return -1;
  CollectiveRecord r;
  r.group = group;
  r.ranks = ranks;
  r.seq = seq;
  r.op = op;
  r.what = what;
  r.shape = t.sizes().vec();
  r.dtype = c10::toString(t.scalar_type());
  r.start = now_seconds();
  r.state = "started";
  std::lock_guard<std::mutex> lock(mutex_);
  r.id = next_id_++;
  records_.push_back(std::move(r));
  if (static_cast<int64_t>(records_.size()) > capacity_) records_.pop_front();
  return records_.back().id;
}

CollectiveRecord* FlightRecorder::find(int64_t id) {
  if (id < 0 || records_.empty() || id < records_.front().id) return nullptr;
  return &records_.at(static_cast<size_t>(id - records_.front().id));
}

void FlightRecorder::waiting(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto* r = find(id)) r->state = "waiting";
}

void FlightRecorder::end(int64_t id, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto* r = find(id)) {
    r->end = now_seconds();
    r->state = ok ? "completed" : "failed";
  }
}

std::vector<CollectiveRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {records_.begin(), records_.end()};
}

void FlightRecorder::dump(const std::string& reason) const {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(dump_mutex_);
  try {
    json entries = json::array();
    for (const auto& r : records()) entries.push_back(to_json(r));
    const json out = {{"rank", rank_}, {"reason", reason}, {"dumped_at", now_seconds()},
                      {"entries", entries}};
    fs::create_directories(path_.parent_path());
    const fs::path tmp = path_.string() + ".tmp";
    std::ofstream(tmp) << out.dump(1) << "\n";
    fs::rename(tmp, path_);
  } catch (const std::exception&) {
    // On the way out of a failure: the failure's own error is the one to report.
  }
}

void dump_comm_traces_on_signal(std::shared_ptr<FlightRecorder> recorder) {
  static bool installed = false;
  if (installed || !recorder->enabled() || pipe2(g_dump_pipe, O_CLOEXEC) != 0) return;
  installed = true;
  std::thread([recorder] {
    char c;
    while (read(g_dump_pipe[0], &c, 1) == 1) recorder->dump("SIGUSR1: another rank failed");
  }).detach();
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

std::vector<std::string> explain_comm_traces(const fs::path& folder, fs::file_time_type since) {
  std::map<int, std::vector<CollectiveRecord>> traces;  // by global rank
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || e.path().extension() != ".json") continue;
    if (e.last_write_time(ec) < since) continue;
    try {
      const json j = json::parse(std::ifstream(e.path()));
      std::vector<CollectiveRecord> records;
      for (const auto& r : j.at("entries")) records.push_back(from_json(r));
      traces[j.at("rank").get<int>()] = std::move(records);
    } catch (const std::exception&) {
      continue;  // unreadable: as if the rank wrote none
    }
  }
  if (traces.empty()) return {};
  // The operation to explain: the earliest failed one, else the earliest a rank was blocked in,
  // else the earliest not finished (a send or prefetch nobody waited for yet).
  const CollectiveRecord* culprit = nullptr;
  int culprit_rank = -1;
  for (const char* state : {"failed", "waiting", "started"}) {
    for (const auto& [rank, records] : traces) {
      for (const auto& r : records) {
        if (r.state == state && (!culprit || r.start < culprit->start)) {
          culprit = &r;
          culprit_rank = rank;
        }
      }
    }
    if (culprit) break;
  }
  std::vector<std::string> lines;
  if (!culprit) {
    lines.push_back("no operation failed or was in flight in the traces of " +
                    std::to_string(traces.size()) + " rank(s)");
    return lines;
  }
  lines.push_back(fmt::format("rank {} {} in {}, after {:.1f} s", culprit_rank,
                              culprit->state == "failed"    ? "failed"
                              : culprit->state == "waiting" ? "was waiting"
                                                            : "had not finished",
                              describe(*culprit),
                              (culprit->end > 0 ? culprit->end : culprit->start) - culprit->start));
  for (int member : culprit->ranks) {
    if (member == culprit_rank) continue;
    auto it = traces.find(member);
    if (it == traces.end()) {
      lines.push_back(fmt::format("rank {} wrote no comm trace", member));
      continue;
    }
    const CollectiveRecord* same = nullptr;
    const CollectiveRecord* last_on_group = nullptr;
    for (const auto& r : it->second) {
      if (r.group != culprit->group) continue;
      if (r.seq == culprit->seq) same = &r;
      if (!last_on_group || r.seq > last_on_group->seq) last_on_group = &r;
    }
    if (same) {
      lines.push_back(fmt::format("rank {} was in the same operation ({})", member, same->state));
    } else if (!last_on_group || last_on_group->seq < culprit->seq) {
      lines.push_back(fmt::format(
          "rank {} never started #{} on group '{}': its last operation there was {}; its last "
          "overall {}",
          member, culprit->seq, culprit->group,
          last_on_group ? describe(*last_on_group) : std::string("none"),
          it->second.empty() ? std::string("none") : describe(it->second.back())));
    } else {
      lines.push_back(fmt::format("rank {} is past it, at {}", member, describe(*last_on_group)));
    }
  }
  return lines;
}

}  // namespace titan::distributed
