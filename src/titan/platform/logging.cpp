#include "titan/platform/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>

namespace titan::log {
namespace {

constexpr const char* kPattern = "[titan] %Y-%m-%d %H:%M:%S,%e - %^%l%$ - %v";

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("titan", sink);
    l->set_pattern(kPattern);
    return l;
  }();
  return instance;
}

}  // namespace

void init(const std::string& log_file, bool to_console, const std::string& rank_prefix) {
  std::vector<spdlog::sink_ptr> sinks;
  if (to_console) {
    auto console = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    console->set_pattern(rank_prefix + kPattern);
    sinks.push_back(console);
  }
  if (!log_file.empty()) {
    std::filesystem::create_directories(std::filesystem::path(log_file).parent_path());
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/true);
    file->set_pattern(kPattern);
    sinks.push_back(file);
  }
  auto l = std::make_shared<spdlog::logger>("titan", sinks.begin(), sinks.end());
  l->flush_on(spdlog::level::info);
  logger() = l;
}

void info(const std::string& message) { logger()->info(message); }
void warn(const std::string& message) { logger()->warn(message); }
void error(const std::string& message) { logger()->error(message); }

}  // namespace titan::log
