#include "titan/platform/env.h"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "titan/errors.h"

namespace titan::platform {

std::filesystem::path titan_cache_dir() {
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/") / ".cache" / "titan";
}

std::filesystem::path titan_cache_dir(const char* variable, const char* name) {
  if (const char* dir = std::getenv(variable); dir != nullptr && *dir != '\0') return dir;
  return titan_cache_dir() / name;
}

int env_int(const char* name, int fallback, int min) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < min) {
    throw ConfigError(fmt::format("environment variable {}='{}' must be an integer >= {}", name,
                                  v, min));
  }
  return static_cast<int>(x);
}

bool test_hook_at(const char* name, int rank, int64_t step, const char* where) {
  const char* at = std::getenv(name);
  if (!at) return false;
  const std::string want = where ? fmt::format("{}:{}:{}", rank, step, where)
                                 : fmt::format("{}:{}", rank, step);
  return want == at;
}

void kill_if_asked(int rank, int64_t step, const char* where) {
  if (!test_hook_at("TITAN_TEST_KILL_AT", rank, step, where)) return;
  if (env_int("TORCHELASTIC_RESTART_COUNT", 0) > 0) return;
  std::raise(SIGKILL);
}

}  // namespace titan::platform
