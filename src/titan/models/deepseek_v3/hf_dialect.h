// DeepSeek-V3's Hugging Face dialect (DeepseekV3ForCausalLM) over the common Transformer's
// mapping (models/common/hf_adapter.h): multi-head latent attention's names
//   layers.{i}.attention.wq / wq_a / q_norm / wq_b <-> model.layers.{i}.self_attn.q_proj /
//                                            q_a_proj / q_a_layernorm / q_b_proj
//   layers.{i}.attention.wkv_a / kv_norm / wkv_b <-> model.layers.{i}.self_attn.
//                                            kv_a_proj_with_mqa / kv_a_layernorm / kv_b_proj
//   layers.{i}.moe.expert_bias (buffer) <-> model.layers.{i}.mlp.gate.e_score_correction_bias
// and DeepseekV3Config's keys: MLA, YaRN, the first first_k_dense_replace layers dense and the
// rest sigmoid-scored, group-limited experts with shared experts.
#pragma once

#include "titan/models/common/hf_adapter.h"

namespace titan::models::deepseek_v3 {

const HfDialect& hf_dialect();

}  // namespace titan::models::deepseek_v3
