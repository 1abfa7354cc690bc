// A Hugging Face model folder as `save_pretrained` writes it: config.json (the architecture)
// beside the weights in safetensors files (see safetensors.h). `titan generate
// --hf_assets_path` and TrainSpec::build_from_hf / from_hf start from here.
#pragma once

#include <nlohmann/json.hpp>

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

}  // namespace titan::components
