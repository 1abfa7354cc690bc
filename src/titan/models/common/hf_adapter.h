// Hugging Face interchange for the common Transformer (LlamaForCausalLM, Qwen3ForCausalLM and
// Qwen3MoeForCausalLM layouts; a family with names and keys of its own adds them as an
// HfDialect, e.g. DeepSeek-V3's in models/deepseek_v3/hf_dialect.h): the model arguments a
// config.json describes, and the mapping between titan parameter names (TorchTitan's) and
// Hugging Face's:
//   tok_embeddings.weight               <-> model.embed_tokens.weight
//   layers.{i}.attention.w{q,k,v,o}     <-> model.layers.{i}.self_attn.{q,k,v,o}_proj
//   layers.{i}.attention.{q,k}_norm     <-> model.layers.{i}.self_attn.{q,k}_norm
//   layers.{i}.feed_forward.w1 / w3 / w2 <-> model.layers.{i}.mlp.gate_proj / up_proj / down_proj
//   layers.{i}.attention_norm / ffn_norm <-> model.layers.{i}.input_layernorm /
//                                            post_attention_layernorm
//   layers.{i}.moe.router.gate          <-> model.layers.{i}.mlp.gate
//   layers.{i}.moe.experts.w1 / w3 / w2 [E, ...] <-> model.layers.{i}.mlp.experts.{j}.gate_proj /
//                                            up_proj / down_proj, one module per expert j
//   layers.{i}.moe.shared_experts.w1 / w3 / w2 <-> model.layers.{i}.mlp.shared_experts.*
//   norm.weight <-> model.norm.weight;  output.weight <-> lm_head.weight (absent when tied)
// Hugging Face stores q/k rows in rotate_half order, which is titan's RoPE layout, so tensors
// are copied unchanged (no permutation).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "titan/models/common/causal_lm.h"
#include "titan/models/common/transformer_args.h"

namespace titan::models {

/// What a family adds to the common mapping. Empty: the common mapping alone.
struct HfDialect {
  /// Layer names looked up before the common ones ("attention.wq_a.weight" ->
  /// "self_attn.q_a_proj.weight").
  std::map<std::string, std::string> layer_names;
  /// Reads the family's config.json keys into `args` after the common ones, in place of the
  /// common rope_scaling and experts.
  std::function<void(const nlohmann::json& config, TransformerArgs& args)> read_config;
  /// The family's keys for `args`, over the common ones, in place of the common experts'.
  std::function<nlohmann::json(const TransformerArgs& args)> write_config;
  /// Whether the model's buffers travel too (DeepSeek-V3's expert correction biases).
  bool buffers = false;
};

/// Model arguments from a Hugging Face config.json: hidden_size, num_hidden_layers,
/// num_attention_heads, num_key_value_heads (default: heads), head_dim (default: hidden /
/// heads), intermediate_size, vocab_size, rms_norm_eps, rope_theta (default 10000),
/// rope_scaling (null, "default" or "llama3"), tie_word_embeddings (default false); with
/// num_experts (Qwen3-MoE) every layer a softmax top-k mixture of experts: num_experts_per_tok,
/// moe_intermediate_size, norm_topk_prob (default false), load balancing at its default.
/// `qk_norm` is the family's (Qwen3: true). Throws CheckpointError naming the missing or
/// invalid key, and for features titan does not implement (biases, activations other than
/// silu, other rope_scaling types, dense layers among Qwen3-MoE's, shared experts); a
/// dialect's read_config takes over the rope scaling and experts.
TransformerArgs args_from_hf_config(const nlohmann::json& config, bool qk_norm,
                                    const HfDialect& dialect = HfDialect());

/// The config.json Hugging Face's `architecture` ("LlamaForCausalLM", "Qwen3ForCausalLM") of
/// `model_type` reads for `args`: the inverse of args_from_hf_config (hidden_size,
/// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
/// vocab_size, rms_norm_eps, rope_theta, rope_scaling, tie_word_embeddings, hidden_act "silu",
/// no biases; for a mixture of experts Qwen3-MoE's keys) with torch_dtype "float32". max_position_embeddings is left to Hugging Face's
/// default: titan's arguments do not fix a context length.
nlohmann::json hf_config_from_args(const TransformerArgs& args, const std::string& model_type,
                                   const std::string& architecture,
                                   const HfDialect& dialect = HfDialect());

/// The Hugging Face tensors of titan parameter (or buffer) `name` holding `value`: one (name,
/// value) pair, or for grouped experts [E, ...] one per expert (mlp.experts.{j}.*,
/// value.select(0, j)), the dialect's names first. Throws CheckpointError for a name without
/// one.
std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(
    const std::string& name, const torch::Tensor& value, const HfDialect& dialect = HfDialect());

/// The model's parameters under Hugging Face names (the tensors themselves, not copies), and its
/// buffers too when the dialect says.
std::map<std::string, torch::Tensor> to_hf_state_dict(CausalLM& model,
                                                      const HfDialect& dialect = HfDialect());

/// Copies Hugging Face-named tensors into the model's parameters (converting dtype and device).
/// `lm_head.weight` is ignored when the model is tied, and so are `*.rotary_emb.inv_freq`
/// buffers that old checkpoints carry. Throws CheckpointError listing every missing,
/// unexpected or mis-shaped tensor, before anything is copied.
void load_hf_state_dict(CausalLM& model, const std::map<std::string, torch::Tensor>& hf,
                        const HfDialect& dialect = HfDialect());

}  // namespace titan::models
