// The deepseek_v3 family (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", arXiv:2412.19437):
// the common Transformer with multi-head latent attention (models/common/mla.h) and YaRN RoPE,
// the first n_dense_layers blocks dense SwiGLU and the rest mixtures of experts with shared
// experts and auxiliary-loss-free load balancing. TorchTitan's flavors and the Hugging Face
// "deepseek_v3" model type.
#pragma once

#include "titan/models/common/flavors.h"

namespace titan::models::deepseek_v3 {

/// TorchTitan's debugmodel (dim 256, 6 layers, 16 heads, MLA without a q latent, 8 experts of
/// width 256, softmax top 3, 2 shared experts), 16B (DeepSeek-V2-Lite's shape), 236B
/// (DeepSeek-V2's: q latent, 160 experts, groups 8 / 3, route_scale 16) and 671B (DeepSeek-V3:
/// 256 sigmoid-scored experts, groups 8 / 4, route_scale 2.5, first 3 layers dense); all with
/// YaRN (factor 40 over 4096 positions).
const FlavorTable& flavors();

}  // namespace titan::models::deepseek_v3
