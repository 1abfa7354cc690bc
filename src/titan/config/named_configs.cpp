#include "titan/config/named_configs.h"

#include "titan/config/named_configs_data.h"

namespace titan::config {

const std::vector<NamedConfig>& named_configs() {
  static const std::vector<NamedConfig> all = embedded_named_configs();
  return all;
}

std::optional<NamedConfig> find_named_config(const std::string& family, const std::string& name) {
  for (const auto& c : named_configs()) {
    if (c.family == family && c.name == name) return c;
  }
  return std::nullopt;
}

std::string family_from_module(const std::string& module) {
  auto dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

}  // namespace titan::config
