#include "titan/models/common/hf_config_keys.h"

#include <fmt/format.h>

#include "titan/errors.h"

namespace titan::models::hf_keys {

std::string where(const nlohmann::json& config) {
  return config.contains("model_type") && config["model_type"].is_string()
             ? fmt::format("config.json (model_type '{}')", config["model_type"].get<std::string>())
             : std::string("config.json");
}

bool has(const nlohmann::json& config, const char* key) {
  return config.contains(key) && !config[key].is_null();
}

int64_t get_int(const nlohmann::json& config, const char* key, std::optional<int64_t> fallback) {
  if (!has(config, key)) {
    if (fallback) return *fallback;
    throw CheckpointError(fmt::format("{}: missing required key '{}'", where(config), key));
  }
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    throw CheckpointError(
        fmt::format("{}: '{}' must be a positive integer, got {}", where(config), key, v.dump()));
  }
  return v.get<int64_t>();
}

double get_number(const nlohmann::json& config, const char* key, std::optional<double> fallback) {
  if (!has(config, key)) {
    if (fallback) return *fallback;
    throw CheckpointError(fmt::format("{}: missing required key '{}'", where(config), key));
  }
  const auto& v = config[key];
  if (!v.is_number()) {
    throw CheckpointError(
        fmt::format("{}: '{}' must be a number, got {}", where(config), key, v.dump()));
  }
  return v.get<double>();
}

bool get_bool(const nlohmann::json& config, const char* key, bool fallback) {
  if (!has(config, key)) return fallback;
  if (!config[key].is_boolean()) {
    throw CheckpointError(fmt::format("{}: '{}' must be true or false, got {}", where(config), key,
                                      config[key].dump()));
  }
  return config[key].get<bool>();
}

int64_t get_count(const nlohmann::json& config, const char* key, int64_t fallback) {
  if (!has(config, key)) return fallback;
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    throw CheckpointError(
        fmt::format("{}: '{}' must be an integer >= 0, got {}", where(config), key, v.dump()));
  }
  return v.get<int64_t>();
}

}  // namespace titan::models::hf_keys
