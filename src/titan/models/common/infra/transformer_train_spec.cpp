#include "titan/models/common/infra/transformer_train_spec.h"

#include "titan/models/common/hf_adapter.h"
#include "titan/models/common/infra/parallelize.h"
#include "titan/models/common/pipeline_split.h"
#include "titan/models/common/transformer.h"

namespace titan::models {

protocols::TrainSpec transformer_train_spec(const std::string& family, const FlavorTable& flavors,
                                            const HfModelTypes& hf_types, bool qk_norm) {
  protocols::TrainSpec spec;
  spec.name = family;
  for (const auto& [name, args] : flavors) spec.flavors.push_back(name);
  spec.hf_model_types = {hf_types.dense_type};
  if (!hf_types.moe_type.empty()) spec.hf_model_types.push_back(hf_types.moe_type);
  spec.build_part = [flavors, family](const std::string& flavor, torch::Device device,
                                      const PartRange& part) {
    return std::make_shared<Transformer>(find_flavor(flavors, family, flavor),
                                         torch::TensorOptions().device(device), part);
  };
  spec.build_on_device = [build = spec.build_part](const std::string& flavor,
                                                   torch::Device device) {
    return build(flavor, device, PartRange());
  };
  spec.pipeline_split = [flavors, family](const std::string& flavor, const PipelineSplit& split) {
    return split_for_pipeline(find_flavor(flavors, family, flavor).n_layers, split);
  };
  spec.build = [build = spec.build_on_device](const std::string& flavor) {
    return build(flavor, torch::kCPU);
  };
  spec.build_from_hf = [qk_norm](const nlohmann::json& config) -> std::shared_ptr<CausalLM> {
    return std::make_shared<Transformer>(args_from_hf_config(config, qk_norm));
  };
  spec.hf_config = [flavors, family, hf_types](const std::string& flavor) {
    const auto args = find_flavor(flavors, family, flavor);
    return args.moe ? hf_config_from_args(args, hf_types.moe_type, hf_types.moe_architecture)
                    : hf_config_from_args(args, hf_types.dense_type, hf_types.dense_architecture);
  };
  spec.to_hf = [](CausalLM& model) { return to_hf_state_dict(model); };
  spec.from_hf = [](CausalLM& model, const protocols::StateDict& hf) {
    load_hf_state_dict(model, hf);
  };
  spec.parallelize = parallelize_transformer;
  return spec;
}

}  // namespace titan::models
