// Reading settings from environment variables (torchrun's and the launcher's), and the test
// hooks that stop, break or kill one rank at one step.
#pragma once

#include <cstdint>
#include <filesystem>

namespace titan::platform {

/// The integer value of environment variable `name`, or `fallback` when it is unset or empty.
/// Throws ConfigError naming the variable when the value is not an integer >= `min`.
int env_int(const char* name, int fallback, int min = 0);

/// titan's per-user cache folder, $HOME/.cache/titan (datasets, token caches, validated
/// baselines live below it unless their own variables move them).
std::filesystem::path titan_cache_dir();
/// One folder of it: environment variable `variable` when set and not empty, else
/// titan_cache_dir() / `name`.
std::filesystem::path titan_cache_dir(const char* variable, const char* name);

/// Test hooks: whether environment variable `name` is "<rank>:<step>" (with `where`,
/// "<rank>:<step>:<where>") for this rank and step.
bool test_hook_at(const char* name, int rank, int64_t step, const char* where = nullptr);

/// Test hook TITAN_TEST_KILL_AT="<rank>:<step>[:<where>]": that rank dies of SIGKILL there,
/// in a first start only (the launcher's TORCHELASTIC_RESTART_COUNT unset or 0), so that a
/// restarted run gets past it.
void kill_if_asked(int rank, int64_t step, const char* where = nullptr);

}  // namespace titan::platform
