#include "titan/platform/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <fmt/chrono.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace titan::log {
namespace {

// TorchTitan's format: "[titan] 2026-01-01 12:00:00,000 - INFO - message".
constexpr const char* kPattern = "[titan] %Y-%m-%d %H:%M:%S,%e - %* - %v";

// %*: the level in Python logging's upper-case names (INFO, WARNING, ERROR).
class UpperLevel final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static const char* names[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", ""};
    std::string_view name = names[static_cast<int>(msg.level)];
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<UpperLevel>();
  }
};

std::unique_ptr<spdlog::formatter> make_formatter(const std::string& prefix) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<UpperLevel>('*').set_pattern(prefix + kPattern);
  return f;
}

std::shared_ptr<spdlog::logger>& logger() {
  // Before init(): a utility command's (tokenize, generate) warnings go to stderr, so that its
  // stdout stays the result alone.
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("titan", sink);
    l->set_formatter(make_formatter(""));
    return l;
  }();
  return instance;
}

// LOG_RANK: "0" (default), "0,3", or "all".
bool rank_logs_to_console(int rank) {
  const char* env = std::getenv("LOG_RANK");
  std::string spec = env ? env : "0";
  if (spec == "all") return true;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == std::to_string(rank)) return true;
  }
  return false;
}

}  // namespace

void init(const std::string& log_file, bool to_console, const std::string& rank_prefix) {
  std::vector<spdlog::sink_ptr> sinks;
  if (to_console) {
    auto console = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    console->set_formatter(make_formatter(rank_prefix));
    sinks.push_back(console);
  }
  if (!log_file.empty()) {
    std::filesystem::create_directories(std::filesystem::path(log_file).parent_path());
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/false);
    file->set_formatter(make_formatter(""));
    sinks.push_back(file);
  }
  auto l = std::make_shared<spdlog::logger>("titan", sinks.begin(), sinks.end());
  l->flush_on(spdlog::level::info);
  logger() = l;
}

void init_rank(const std::string& dump_folder, int rank, int world_size) {
  const std::string file = fmt::format("{}/logs/rank_{}.log", dump_folder, rank);
  std::filesystem::create_directories(std::filesystem::path(file).parent_path());
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  std::ofstream(file, std::ios::app) << fmt::format(
      "{} {:%Y-%m-%d %H:%M:%S} (rank {} of {}, pid {}, restart {}) =====\n", kRunHeader,
      fmt::localtime(std::time(nullptr)), rank, world_size, ::getpid(),
      restart != nullptr && *restart != '\0' ? restart : "0");
  init(file, rank_logs_to_console(rank), world_size > 1 ? fmt::format("[rank{}]:", rank) : "");
}

std::string latest_run(const std::string& text) {
  const size_t at = text.rfind(kRunHeader);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return text;
  const size_t next = text.find('\n', at);
  return next == std::string::npos ? std::string() : text.substr(next + 1);
}

void info(const std::string& message) { logger()->info(message); }
void warn(const std::string& message) { logger()->warn(message); }
void error(const std::string& message) { logger()->error(message); }

}  // namespace titan::log
