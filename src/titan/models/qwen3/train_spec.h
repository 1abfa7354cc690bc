// The qwen3 family (Qwen3 dense models; Qwen Team 2025, "Qwen3 Technical Report",
// arXiv:2505.09388): Llama's architecture plus per-head RMSNorm on q and k, head_dim 128
// independent of dim / heads, RoPE theta 1e6, RMSNorm eps 1e-6. TorchTitan's flavors and the
// Hugging Face "qwen3" model type.
#pragma once

#include "titan/models/common/transformer_train_spec.h"
#include "titan/train/train_spec.h"

namespace titan::models::qwen3 {

/// debugmodel (dim 256, 8 layers, 16/8 heads, FFN 3072, vocab 2048), 0.6B, 1.7B, 4B (tied),
/// 8B, 14B, 32B (untied); real flavors use the 151,936-token vocabulary.
const FlavorTable& flavors();

/// The spec registered as "qwen3" (Hugging Face model_type "qwen3").
train::TrainSpec train_spec();

}  // namespace titan::models::qwen3
