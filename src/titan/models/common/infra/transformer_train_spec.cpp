#include "titan/models/common/infra/transformer_train_spec.h"

#include "titan/models/common/hf_adapter.h"
#include "titan/models/common/infra/parallelize.h"
#include "titan/models/common/pipeline_split.h"
#include "titan/models/common/transformer.h"

namespace titan::models {

protocols::TrainSpec transformer_train_spec(const std::string& family, const FlavorTable& flavors,
                                            const HfModelTypes& hf_types, bool qk_norm,
                                            const HfDialect& hf_dialect) {
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
  spec.build_from_hf = [qk_norm,
                        hf_dialect](const nlohmann::json& config) -> std::shared_ptr<CausalLM> {
    return std::make_shared<Transformer>(args_from_hf_config(config, qk_norm, hf_dialect));
  };
  spec.hf_config = [flavors, family, hf_types, hf_dialect](const std::string& flavor) {
    const auto args = find_flavor(flavors, family, flavor);
    const bool moe = args.moe && !hf_types.moe_type.empty();
    return hf_config_from_args(args, moe ? hf_types.moe_type : hf_types.dense_type,
                               moe ? hf_types.moe_architecture : hf_types.dense_architecture,
                               hf_dialect);
  };
  spec.to_hf = [hf_dialect](CausalLM& model) { return to_hf_state_dict(model, hf_dialect); };
  spec.from_hf = [hf_dialect](CausalLM& model, const protocols::StateDict& hf) {
    load_hf_state_dict(model, hf, hf_dialect);
  };
  spec.parallelize = parallelize_transformer;
  return spec;
}

}  // namespace titan::models
