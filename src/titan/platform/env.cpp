#include "titan/platform/env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "titan/errors.h"

namespace titan::platform {

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

}  // namespace titan::platform
