// The qwen3 family (Qwen Team 2025, "Qwen3 Technical Report", arXiv:2505.09388): Llama's
// architecture plus per-head RMSNorm on q and k, head_dim 128 independent of dim / heads, RoPE
// theta 1e6, RMSNorm eps 1e-6; Qwen3-MoE replaces every SwiGLU with 128 experts, softmax top-8
// with renormalised gates. TorchTitan's flavors and the Hugging Face "qwen3" and "qwen3_moe"
// model types.
#pragma once

#include "titan/models/common/flavors.h"

namespace titan::models::qwen3 {

/// debugmodel (dim 256, 8 layers, 16/8 heads, FFN 3072, vocab 2048), 0.6B, 1.7B, 4B (tied),
/// 8B, 14B, 32B (untied); MoE: debugmodel_moe (debugmodel's attention, 64 experts of width 768,
/// top 8), 30B-A3B, 235B-A22B, and titan's CI-sized debugmodel_moe_small (2 layers, 8 experts,
/// top 2). Real flavors use the 151,936-token vocabulary.
const FlavorTable& flavors();

}  // namespace titan::models::qwen3
