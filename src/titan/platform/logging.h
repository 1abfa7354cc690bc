// The run's logger: TorchTitan-style lines ("[titan] 2026-01-01 12:00:00,000 - INFO - msg") to
// <dump_folder>/logs/rank_<r>.log always, and to the console on the ranks LOG_RANK selects.
#pragma once

#include <fmt/format.h>

#include <string>

namespace titan::log {

/// Opens `log_file` for appending (parent folders created; empty = no file), so a resumed run
/// keeps the earlier run's lines, and decides console echo.
/// `rank_prefix` is prepended to console lines ("[rank1]:") when several ranks share a console.
/// Safe to call again (the new sinks replace the old ones).
void init(const std::string& log_file, bool to_console, const std::string& rank_prefix);

/// init() for one rank of a `world_size`-rank run: <dump_folder>/logs/rank_<rank>.log, echoed to
/// the console when LOG_RANK selects the rank ("0", the default; "0,3"; "all"), with a
/// "[rank<r>]:" prefix when the world has several ranks. The file is appended to across runs,
/// so each run (and each restart) first writes a line starting with kRunHeader to it.
void init_rank(const std::string& dump_folder, int rank, int world_size);

/// How the line that starts a run in a rank's log file begins.
inline constexpr const char* kRunHeader = "===== titan run started";

/// The lines of `text` (a rank's log file) after its last kRunHeader line: the latest run's.
std::string latest_run(const std::string& text);

/// Writes one INFO / WARNING / ERROR line.
void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  info(fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  warn(fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace titan::log
