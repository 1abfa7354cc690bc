#include "titan/models/common/weight_module.h"

#include <algorithm>

namespace titan::models {
namespace {

void collect(torch::nn::Module& m, const std::vector<torch::nn::Module*>& exclude,
             std::vector<WeightModule*>& out) {
  if (std::find(exclude.begin(), exclude.end(), &m) != exclude.end()) return;
  if (auto* w = dynamic_cast<WeightModule*>(&m)) out.push_back(w);
  for (auto& child : m.children()) collect(*child, exclude, out);
}

}  // namespace

std::vector<WeightModule*> weight_modules(torch::nn::Module& root,
                                          const std::vector<torch::nn::Module*>& exclude) {
  std::vector<WeightModule*> out;
  collect(root, exclude, out);
  return out;
}

std::map<std::string, WeightModule*> weight_modules_by_name(torch::nn::Module& root) {
  std::map<std::string, WeightModule*> out;
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    if (auto* w = dynamic_cast<WeightModule*>(item.value().get())) out[item.key() + ".weight"] = w;
  }
  return out;
}

}  // namespace titan::models
