#include "titan/train/train_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "titan/errors.h"
#include "titan/models/deepseek_v3/train_spec.h"
#include "titan/models/llama3/train_spec.h"
#include "titan/models/qwen3/train_spec.h"

namespace titan::train {
namespace {

// Every registered family, in the order `titan` lists them. Add a family here.
const std::vector<TrainSpec>& registry() {
  static const std::vector<TrainSpec> specs = {
      models::llama3::train_spec(),
      models::qwen3::train_spec(),
      models::deepseek_v3::train_spec(),
  };
  return specs;
}

}  // namespace

const TrainSpec& get_train_spec(const std::string& name) {
  for (const auto& spec : registry()) {
    if (spec.name == name) return spec;
  }
  throw ConfigError(fmt::format("model.name: '{}' is not a registered model family (valid: {})",
                                name, fmt::join(train_spec_names(), ", ")));
}

const TrainSpec& train_spec_for_hf_model_type(const std::string& model_type) {
  std::vector<std::string> known;
  for (const auto& spec : registry()) {
    for (const auto& type : spec.hf_model_types) {
      if (type == model_type) return spec;
      known.push_back(type);
    }
  }
  throw CheckpointError(fmt::format("config.json model_type '{}' is not supported (supported: {})",
                                    model_type, fmt::join(known, ", ")));
}

std::vector<std::string> train_spec_names() {
  std::vector<std::string> names;
  for (const auto& spec : registry()) names.push_back(spec.name);
  return names;
}

}  // namespace titan::train
