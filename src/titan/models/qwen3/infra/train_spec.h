// The qwen3 family's TrainSpec: its flavors (flavors.h) on the common Transformer's spec
// (models/common/infra/transformer_train_spec.h).
#pragma once

#include "titan/protocols/train_spec.h"

namespace titan::models::qwen3 {

/// The spec registered as "qwen3" (Hugging Face model_type "qwen3" or "qwen3_moe").
protocols::TrainSpec train_spec();

}  // namespace titan::models::qwen3
