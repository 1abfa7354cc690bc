// The TrainSpec of a family built on the common Transformer (llama3, qwen3): builders from a
// flavor table or a Hugging Face config, and the Hugging Face state-dict adapter (hf_adapter.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/models/common/transformer_args.h"
#include "titan/train/train_spec.h"

namespace titan::models {

/// Flavor name -> model arguments, in the order `titan` lists them.
using FlavorTable = std::vector<std::pair<std::string, TransformerArgs>>;

/// The arguments of `flavor` in `table`; throws ConfigError naming model.flavor, the family
/// and the valid flavors.
TransformerArgs find_flavor(const FlavorTable& table, const std::string& family,
                            const std::string& flavor);

/// A family's Hugging Face config.json identity: model_type and architecture of its dense
/// models, and of its mixture-of-experts ones (empty when it has none).
struct HfModelTypes {
  std::string dense_type, dense_architecture;  // "qwen3", "Qwen3ForCausalLM"
  std::string moe_type, moe_architecture;      // "qwen3_moe", "Qwen3MoeForCausalLM"
};

/// A TrainSpec named `family` whose models are Transformers of `flavors`, or shaped by a
/// Hugging Face config.json (args_from_hf_config with `qk_norm`) of one of `hf_types`' model
/// types. Exports write config.json with the dense or the MoE identity, as the flavor is
/// (hf_config_from_args). `parallelize` is the family's parallelize_<family>.
train::TrainSpec transformer_train_spec(const std::string& family, const FlavorTable& flavors,
                                        const HfModelTypes& hf_types, bool qk_norm,
                                        train::TrainSpec::ParallelizeFn parallelize);

}  // namespace titan::models
