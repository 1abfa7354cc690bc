// A Hugging Face model folder as `save_pretrained` writes it: config.json (the architecture)
// beside the weights in safetensors files (see safetensors.h), sharded with
// model.safetensors.index.json when large. `titan generate --hf_assets_path` and
// TrainSpec::build_from_hf / from_hf start from here; checkpoint exports end here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "titan/components/checkpoint/safetensors.h"

namespace titan::components {

struct HfFolder {
  nlohmann::json config;  // config.json
  TensorMap state_dict;   // Hugging Face names -> CPU tensors as stored
};

/// The config of `dir`/config.json. Throws CheckpointError naming the file when it is missing,
/// not JSON, or not a JSON object.
nlohmann::json read_hf_config(const std::string& dir);

/// read_hf_config(dir) and read_safetensors_folder(dir); throws as they do.
HfFolder load_hf_folder(const std::string& dir);

/// save_pretrained's default shard limit ("5GB").
constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

/// Writes a Hugging Face model folder into `dir` (created if needed): config.json = `config`,
/// and `tensors` with floating-point ones converted to `dtype`, in model.safetensors, or, when
/// they total more than `max_shard_bytes`, in model-0000i-of-0000n.safetensors files (name
/// order, each at most `max_shard_bytes` unless one tensor alone is larger) with
/// model.safetensors.index.json = {"metadata": {"total_size": bytes}, "weight_map": {name:
/// file}}. Every file is fsynced. Throws CheckpointError naming the file on I/O failure.
void write_hf_folder(const std::string& dir, const nlohmann::json& config,
                     const TensorMap& tensors, torch::ScalarType dtype,
                     uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace titan::components
