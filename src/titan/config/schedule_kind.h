// The names of parallelism.pipeline_parallel_schedule's values: the part of the pipeline
// schedules (distributed/pipeline/schedule.h) that the config validates.
#pragma once

#include <string>
#include <vector>

namespace titan::config {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZBVZeroBubble };

/// parallelism.pipeline_parallel_schedule, case-insensitive ("gpipe", "1f1b", ...); throws
/// ConfigError naming the key and the valid names.
ScheduleKind parse_schedule(const std::string& name);
/// TorchTitan's spelling: "GPipe", "1F1B", "Interleaved1F1B", "ZBVZeroBubble".
const char* schedule_name(ScheduleKind kind);
/// Every schedule's name, as schedule_name spells it.
std::vector<std::string> schedule_names();
/// Schedules that run several stages on each rank (their default is 2 per rank).
bool is_multi_stage(ScheduleKind kind);

}  // namespace titan::config
