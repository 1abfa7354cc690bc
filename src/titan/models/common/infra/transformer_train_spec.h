// The TrainSpec of a family built on the common Transformer (llama3, qwen3, deepseek_v3):
// builders from a flavor table or a Hugging Face config, the Hugging Face state-dict adapter
// (hf_adapter.h), and parallelize_transformer (parallelize.h).
#pragma once

#include <string>

#include "titan/models/common/flavors.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/protocols/train_spec.h"

namespace titan::models {

/// A family's Hugging Face config.json identity: model_type and architecture of its dense
/// models, and of its mixture-of-experts ones (empty when it has none).
struct HfModelTypes {
  std::string dense_type, dense_architecture;  // "qwen3", "Qwen3ForCausalLM"
  std::string moe_type, moe_architecture;      // "qwen3_moe", "Qwen3MoeForCausalLM"
};

/// A TrainSpec named `family` whose models are Transformers of `flavors`, or shaped by a
/// Hugging Face config.json (args_from_hf_config with `qk_norm`) of one of `hf_types`' model
/// types. Exports write config.json with the dense or the MoE identity, as the flavor is
/// (hf_config_from_args), in `hf_dialect` where the family has one. Its parallelize is
/// parallelize_transformer; a family whose parallelisms differ replaces it.
protocols::TrainSpec transformer_train_spec(const std::string& family, const FlavorTable& flavors,
                                            const HfModelTypes& hf_types, bool qk_norm,
                                            const HfDialect& hf_dialect = HfDialect());

}  // namespace titan::models
