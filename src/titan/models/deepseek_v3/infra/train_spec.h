// The deepseek_v3 family's TrainSpec: its flavors (flavors.h) on the common Transformer's spec
// (models/common/infra/transformer_train_spec.h).
#pragma once

#include "titan/protocols/train_spec.h"

namespace titan::models::deepseek_v3 {

/// The spec registered as "deepseek_v3" (Hugging Face model_type "deepseek_v3").
protocols::TrainSpec train_spec();

}  // namespace titan::models::deepseek_v3
