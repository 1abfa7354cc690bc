// What a model family registers (TorchTitan's protocols/train_spec.py): its flavors, how to
// build the model, how to parallelize it, and how to exchange weights with Hugging Face. The
// trainer never names a family; it looks the spec up by `model.name`. This is the contract the
// layers above the models meet on, so it names the types it passes only by declaration.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace titan::models {
class CausalLM;
struct PartRange;
struct PipelineSplit;
}  // namespace titan::models
namespace titan::config {
struct JobConfig;
}
namespace titan::distributed {
class DeviceMesh;
class ModelPart;
struct ParallelDims;
}  // namespace titan::distributed

namespace titan::protocols {

using StateDict = std::map<std::string, torch::Tensor>;

struct TrainSpec {
  std::string name;                         // "llama3"
  std::vector<std::string> flavors;         // "debugmodel", "8B", ...
  std::vector<std::string> hf_model_types;  // config.json model_type values, e.g. "llama"
  /// Builds an uninitialised model of `flavor` (throws ConfigError naming model.flavor and
  /// the valid flavors).
  std::function<std::shared_ptr<models::CausalLM>(const std::string& flavor)> build;
  /// As build, with the parameters allocated on `device`; torch::kMeta gives a shape-only
  /// model (no memory) for parameter and FLOP counts of any flavor.
  std::function<std::shared_ptr<models::CausalLM>(const std::string& flavor, torch::Device device)>
      build_on_device;
  /// As build_on_device, holding only the pieces `part` (one pipeline stage's).
  std::function<std::shared_ptr<models::CausalLM>(const std::string& flavor, torch::Device device,
                                                  const models::PartRange& part)>
      build_part;
  /// The family's pipeline splitter (the split step of TorchTitan's pipelining_fn): the pieces
  /// of every stage of `flavor` cut as `split` says, in stage order (one stage: the whole
  /// model). Throws ConfigError as models::split_for_pipeline does.
  std::function<std::vector<models::PartRange>(const std::string& flavor,
                                               const models::PipelineSplit& split)>
      pipeline_split;
  /// Builds an uninitialised model shaped as a Hugging Face config.json says.
  std::function<std::shared_ptr<models::CausalLM>(const nlohmann::json& hf_config)> build_from_hf;
  /// The Hugging Face config.json of `flavor` (what exports write beside the weights; throws
  /// ConfigError as build does).
  std::function<nlohmann::json(const std::string& flavor)> hf_config;
  /// Model weights under Hugging Face names (model.layers.0.self_attn.q_proj.weight, ...).
  std::function<StateDict(models::CausalLM& model)> to_hf;
  /// Copies Hugging Face-named tensors into the model; throws CheckpointError naming any
  /// missing, unexpected or mis-shaped tensor.
  std::function<void(models::CausalLM& model, const StateDict& hf)> from_hf;
  /// The family's parallelize function (TorchTitan's parallelize_<family>; the common
  /// Transformer's families share parallelize_transformer): applies the parallelisms of `dims` to one model part
  /// (built on the meta device; its weights are allocated and initialised afterwards, see
  /// distributed/model_part.h). Throws ConfigError when the model does not divide.
  using ParallelizeFn =
      std::function<void(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                         const distributed::DeviceMesh& mesh, const config::JobConfig& job)>;
  ParallelizeFn parallelize;
};

/// The families titan ships, in the order `titan` lists them (models/registry.cpp: one line a
/// family).
const std::vector<TrainSpec>& builtin_train_specs();
/// Registers one more family (a plugin or a test's), after the built-in ones; throws
/// ConfigError when its name is taken.
void register_train_spec(TrainSpec spec);

/// The spec registered as `name`; throws ConfigError listing the registered names.
const TrainSpec& get_train_spec(const std::string& name);
/// The spec whose hf_model_types contains `model_type`; throws CheckpointError if none.
const TrainSpec& train_spec_for_hf_model_type(const std::string& model_type);
/// Registered family names.
std::vector<std::string> train_spec_names();

}  // namespace titan::protocols
