#include "titan/models/common/flavors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "titan/errors.h"

namespace titan::models {

TransformerArgs find_flavor(const FlavorTable& table, const std::string& family,
                            const std::string& flavor) {
  std::vector<std::string> names;
  for (const auto& [name, args] : table) {
    if (name == flavor) return args;
    names.push_back(name);
  }
  throw ConfigError(fmt::format("model.flavor: '{}' is not a {} flavor (valid: {})", flavor, family,
                                fmt::join(names, ", ")));
}

}  // namespace titan::models
