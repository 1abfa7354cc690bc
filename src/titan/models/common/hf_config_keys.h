// Reading a Hugging Face config.json's keys with errors that name the file, the model type and
// the key: what the common Transformer's reader (hf_adapter.h) and a family's dialect share.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace titan::models::hf_keys {

/// "config.json (model_type 'llama')", for error messages.
std::string where(const nlohmann::json& config);
/// Whether `key` is present and not null.
bool has(const nlohmann::json& config, const char* key);
/// A positive integer; `fallback` when absent, else CheckpointError naming the key.
int64_t get_int(const nlohmann::json& config, const char* key, std::optional<int64_t> fallback);
/// A count that may be 0 (n_shared_experts, first_k_dense_replace); `fallback` when absent.
int64_t get_count(const nlohmann::json& config, const char* key, int64_t fallback);
/// A number; `fallback` when absent, else CheckpointError naming the key.
double get_number(const nlohmann::json& config, const char* key, std::optional<double> fallback);
/// true or false; `fallback` when absent.
bool get_bool(const nlohmann::json& config, const char* key, bool fallback);

}  // namespace titan::models::hf_keys
