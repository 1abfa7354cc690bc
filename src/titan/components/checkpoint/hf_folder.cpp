#include "titan/components/checkpoint/hf_folder.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "titan/components/checkpoint/file_io.h"
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

void write_hf_folder(const std::string& dir, const nlohmann::json& config,
                     const TensorMap& tensors, torch::ScalarType dtype, uint64_t max_shard_bytes) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::vector<TensorMap> shards(1);
  uint64_t shard_bytes = 0;
  uint64_t total_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    auto t = tensor.is_floating_point() ? tensor.detach().to(dtype) : tensor.detach();
    const uint64_t bytes = t.numel() * t.element_size();
    if (shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace(name, std::move(t));
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  const auto write_synced = [](const std::string& path, const TensorMap& shard) {
    write_safetensors(path, shard);
    checkpoint::sync_path(path);
  };
  if (shards.size() == 1) {
    write_synced((fs::path(dir) / "model.safetensors").string(), shards[0]);
  } else {
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1,
                                           shards.size());
      write_synced((fs::path(dir) / file).string(), shards[i]);
      for (const auto& [name, t] : shards[i]) weight_map[name] = file;
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                                  {"weight_map", weight_map}};
    checkpoint::write_file_synced((fs::path(dir) / "model.safetensors.index.json").string(),
                                  index.dump(2));
  }
  checkpoint::write_file_synced((fs::path(dir) / "config.json").string(), config.dump(2));
  checkpoint::sync_path(dir);
}

}  // namespace titan::components
