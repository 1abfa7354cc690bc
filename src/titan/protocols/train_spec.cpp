#include "titan/protocols/train_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <deque>

#include "titan/errors.h"

namespace titan::protocols {
namespace {

// The built-in families, then those registered at run time. A deque: the specs handed out stay
// where they are while more are registered.
std::deque<TrainSpec>& registry() {
  static std::deque<TrainSpec> specs(builtin_train_specs().begin(), builtin_train_specs().end());
  return specs;
}

}  // namespace

void register_train_spec(TrainSpec spec) {
  for (const auto& known : registry()) {
    if (known.name == spec.name) {
      throw ConfigError(
          fmt::format("register_train_spec: a model family named '{}' is already "
                      "registered",
                      spec.name));
    }
  }
  registry().push_back(std::move(spec));
}

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

}  // namespace titan::protocols
