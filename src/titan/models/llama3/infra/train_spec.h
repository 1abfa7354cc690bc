// The llama3 family's TrainSpec: its flavors (flavors.h) on the common Transformer's spec
// (models/common/infra/transformer_train_spec.h).
#pragma once

#include "titan/protocols/train_spec.h"

namespace titan::models::llama3 {

/// The spec registered as "llama3" (Hugging Face model_type "llama").
protocols::TrainSpec train_spec();

}  // namespace titan::models::llama3
