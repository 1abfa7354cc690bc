// Reading integer settings from environment variables (torchrun's and the launcher's).
#pragma once

namespace titan::platform {

/// The integer value of environment variable `name`, or `fallback` when it is unset or empty.
/// Throws ConfigError naming the variable when the value is not an integer >= `min`.
int env_int(const char* name, int fallback, int min = 0);

}  // namespace titan::platform
