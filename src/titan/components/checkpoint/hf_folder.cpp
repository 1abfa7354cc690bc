#include "titan/components/checkpoint/hf_folder.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "titan/errors.h"

namespace titan::components {

nlohmann::json read_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) {
    throw CheckpointError(fmt::format("{}: cannot open the Hugging Face config (is {} a model "
                                      "folder?)",
                                      path, dir));
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  if (!config.is_object()) {
    throw CheckpointError(fmt::format("{}: expected a JSON object, got {}", path, config.type_name()));
  }
  return config;
}

HfFolder load_hf_folder(const std::string& dir) {
  HfFolder folder;
  folder.config = read_hf_config(dir);
  folder.state_dict = read_safetensors_folder(dir);
  return folder;
}

}  // namespace titan::components
