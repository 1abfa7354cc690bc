// Registry of named configs: the TOML files under src/titan/models/<family>/train_configs/,
// embedded in the binary at build time (CMake generates the table), so `CONFIG=<name>` works
// without the source tree.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace titan::config {

struct NamedConfig {
  std::string family;  // model family folder, e.g. "llama3"
  std::string name;    // file stem, e.g. "llama3_debugmodel"
  std::string toml;    // file text
};

/// Every embedded config, sorted by family then name.
const std::vector<NamedConfig>& named_configs();

/// The config `name` of `family`; nullopt if absent.
std::optional<NamedConfig> find_named_config(const std::string& family, const std::string& name);

/// "torchtitan_neuron.models.qwen3" -> "qwen3"; a plain family name is returned unchanged.
std::string family_from_module(const std::string& module);

}  // namespace titan::config
