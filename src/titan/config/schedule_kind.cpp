#include "titan/config/schedule_kind.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "titan/errors.h"

namespace titan::config {
namespace {

constexpr ScheduleKind kKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                   ScheduleKind::Interleaved1F1B, ScheduleKind::ZBVZeroBubble};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

ScheduleKind parse_schedule(const std::string& name) {
  for (auto kind : kKinds) {
    if (lower(name) == lower(schedule_name(kind))) return kind;
  }
  throw ConfigError(
      fmt::format("parallelism.pipeline_parallel_schedule: '{}' is not a schedule "
                  "(valid, in any case: {})",
                  name, fmt::join(schedule_names(), ", ")));
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (auto kind : kKinds) out.push_back(schedule_name(kind));
  return out;
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe:
      return "GPipe";
    case ScheduleKind::OneFOneB:
      return "1F1B";
    case ScheduleKind::Interleaved1F1B:
      return "Interleaved1F1B";
    case ScheduleKind::ZBVZeroBubble:
      return "ZBVZeroBubble";
  }
  return "?";
}

bool is_multi_stage(ScheduleKind kind) {
  return kind == ScheduleKind::Interleaved1F1B || kind == ScheduleKind::ZBVZeroBubble;
}

}  // namespace titan::config
