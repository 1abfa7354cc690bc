#include "titan/models/deepseek_v3/hf_dialect.h"

#include <fmt/format.h>

#include "titan/errors.h"
#include "titan/models/common/hf_config_keys.h"

namespace titan::models::deepseek_v3 {
namespace {

using hf_keys::get_bool;
using hf_keys::get_count;
using hf_keys::get_int;
using hf_keys::get_number;
using hf_keys::has;
using hf_keys::where;

// DeepSeek-V3's attention (MLA) and the correction bias, looked up first for an MLA model.
const std::map<std::string, std::string>& mla_layer_names() {
  static const std::map<std::string, std::string> names = {
      {"attention.wq.weight", "self_attn.q_proj.weight"},
      {"attention.wq_a.weight", "self_attn.q_a_proj.weight"},
      {"attention.q_norm.weight", "self_attn.q_a_layernorm.weight"},
      {"attention.wq_b.weight", "self_attn.q_b_proj.weight"},
      {"attention.wkv_a.weight", "self_attn.kv_a_proj_with_mqa.weight"},
      {"attention.kv_norm.weight", "self_attn.kv_a_layernorm.weight"},
      {"attention.wkv_b.weight", "self_attn.kv_b_proj.weight"},
      {"moe.expert_bias", "mlp.gate.e_score_correction_bias"},
  };
  return names;
}

// DeepSeek-V3's rope_scaling: null, "default" or "yarn" (with mscale = mscale_all_dim, so that
// Hugging Face's cos/sin factor mscale / mscale_all_dim is 1).
std::optional<YarnScaling> yarn_scaling(const nlohmann::json& config, MLAArgs& mla) {
  if (!has(config, "rope_scaling")) return std::nullopt;
  const auto& s = config["rope_scaling"];
  const std::string type = s.is_object() ? s.value(s.contains("rope_type") ? "rope_type" : "type",
                                                   std::string("default"))
                                         : std::string("(not an object)");
  if (type == "default") return std::nullopt;
  if (type != "yarn") {
    throw CheckpointError(
        fmt::format("{}: rope_scaling type '{}' is not supported (supported: "
                    "default, yarn)",
                    where(config), type));
  }
  YarnScaling y;
  y.factor = get_number(s, "factor", std::nullopt);
  y.beta_fast = get_number(s, "beta_fast", 32.0);
  y.beta_slow = get_number(s, "beta_slow", 1.0);
  y.original_max_position_embeddings = get_int(s, "original_max_position_embeddings", std::nullopt);
  mla.mscale = get_number(s, "mscale_all_dim", 0.0);
  if (get_number(s, "mscale", 1.0) != mla.mscale) {
    throw CheckpointError(
        fmt::format("{}: yarn rope_scaling with mscale != mscale_all_dim (cos/sin "
                    "scaled) is not supported",
                    where(config)));
  }
  return y;
}

// DeepSeek-V3's keys (HF DeepseekV3Config): MLA, the first first_k_dense_replace layers dense and
// the rest sigmoid-scored, group-limited experts with shared experts.
void deepseek_v3_args(const nlohmann::json& config, TransformerArgs& a) {
  if (get_int(config, "num_key_value_heads", a.n_heads) != a.n_heads) {
    throw CheckpointError(
        fmt::format("{}: num_key_value_heads must equal num_attention_heads for "
                    "MLA (one key and value per head)",
                    where(config)));
  }
  if (!get_bool(config, "rope_interleave", true)) {
    throw CheckpointError(
        fmt::format("{}: rope_interleave = false is not supported", where(config)));
  }
  if (has(config, "scoring_func") && config["scoring_func"] != "sigmoid") {
    throw CheckpointError(fmt::format("{}: scoring_func {} is not DeepseekV3's (sigmoid)",
                                      where(config), config["scoring_func"].dump()));
  }
  MLAArgs m;
  m.q_lora_rank = get_count(config, "q_lora_rank", 0);
  m.kv_lora_rank = get_int(config, "kv_lora_rank", std::nullopt);
  m.qk_nope_head_dim = get_int(config, "qk_nope_head_dim", std::nullopt);
  m.qk_rope_head_dim = get_int(config, "qk_rope_head_dim", std::nullopt);
  m.v_head_dim = get_int(config, "v_head_dim", std::nullopt);
  a.yarn = yarn_scaling(config, m);
  a.head_dim = m.qk_head_dim();
  a.mla = m;
  MoEArgs e;
  e.num_experts = get_int(config, "n_routed_experts", std::nullopt);
  e.top_k = get_int(config, "num_experts_per_tok", std::nullopt);
  e.hidden_dim = get_int(config, "moe_intermediate_size", std::nullopt);
  e.num_shared_experts = get_count(config, "n_shared_experts", 0);
  e.score_func = MoEArgs::ScoreFunc::Sigmoid;
  e.route_norm = get_bool(config, "norm_topk_prob", true);
  e.route_scale = get_number(config, "routed_scaling_factor", 1.0);
  if (const int64_t groups = get_int(config, "n_group", 1); groups > 1) {
    e.num_expert_groups = groups;
    e.num_limited_groups = get_int(config, "topk_group", std::nullopt);
  }
  a.moe = e;
  a.n_dense_layers = get_count(config, "first_k_dense_replace", 0);
}

// DeepSeek-V3's keys for `a` (the inverse of deepseek_v3_args).
nlohmann::json deepseek_v3_config(const TransformerArgs& a) {
  const MLAArgs& m = *a.mla;
  const MoEArgs& e = *a.moe;
  if (e.score_func != MoEArgs::ScoreFunc::Sigmoid || e.score_before_experts) {
    throw CheckpointError(
        "only sigmoid-scored experts weighted after the experts have a Hugging "
        "Face DeepseekV3 config (the softmax flavors are DeepSeek-V2's scoring)");
  }
  nlohmann::json rope_scaling = nullptr;
  if (a.yarn) {
    rope_scaling = {{"rope_type", "yarn"},
                    {"factor", a.yarn->factor},
                    {"beta_fast", a.yarn->beta_fast},
                    {"beta_slow", a.yarn->beta_slow},
                    {"mscale", m.mscale},
                    {"mscale_all_dim", m.mscale},
                    {"original_max_position_embeddings", a.yarn->original_max_position_embeddings}};
  }
  return {{"num_key_value_heads", a.n_heads},
          {"head_dim", m.qk_rope_head_dim},
          {"qk_head_dim", m.qk_head_dim()},
          {"q_lora_rank", m.q_lora_rank > 0 ? nlohmann::json(m.q_lora_rank) : nlohmann::json()},
          {"kv_lora_rank", m.kv_lora_rank},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"v_head_dim", m.v_head_dim},
          {"rope_scaling", rope_scaling},
          {"rope_interleave", true},
          {"n_routed_experts", e.num_experts},
          {"num_experts_per_tok", e.top_k},
          {"moe_intermediate_size", e.hidden_dim},
          {"n_shared_experts", e.num_shared_experts},
          {"scoring_func", "sigmoid"},
          {"topk_method", "noaux_tc"},
          {"norm_topk_prob", e.route_norm},
          {"routed_scaling_factor", e.route_scale},
          {"n_group", e.num_expert_groups > 0 ? e.num_expert_groups : 1},
          {"topk_group", e.num_expert_groups > 0 ? e.num_limited_groups : 1},
          {"first_k_dense_replace", a.n_dense_layers}};
}

}  // namespace

const HfDialect& hf_dialect() {
  static const HfDialect dialect{mla_layer_names(), deepseek_v3_args, deepseek_v3_config,
                                 /*buffers=*/true};
  return dialect;
}

}  // namespace titan::models::deepseek_v3
