#include "titan/models/common/hf_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "titan/errors.h"
#include "titan/models/common/transformer.h"

namespace titan::models {
namespace {

const std::map<std::string, std::string>& top_level_names() {
  static const std::map<std::string, std::string> names = {
      {"tok_embeddings.weight", "model.embed_tokens.weight"},
      {"norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  return names;
}

const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"attention.wq.weight", "self_attn.q_proj.weight"},
      {"attention.wk.weight", "self_attn.k_proj.weight"},
      {"attention.wv.weight", "self_attn.v_proj.weight"},
      {"attention.wo.weight", "self_attn.o_proj.weight"},
      {"attention.q_norm.weight", "self_attn.q_norm.weight"},
      {"attention.k_norm.weight", "self_attn.k_norm.weight"},
      {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
      {"feed_forward.w2.weight", "mlp.down_proj.weight"},
      {"feed_forward.w3.weight", "mlp.up_proj.weight"},
      {"attention_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"moe.router.gate.weight", "mlp.gate.weight"},
      {"moe.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
      {"moe.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
      {"moe.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
  };
  return names;
}

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

// The grouped experts' [E, ...] weights and the projection each expert's slice is in HF.
const std::map<std::string, std::string>& expert_names() {
  static const std::map<std::string, std::string> names = {
      {"moe.experts.w1.weight", "gate_proj.weight"},
      {"moe.experts.w2.weight", "down_proj.weight"},
      {"moe.experts.w3.weight", "up_proj.weight"},
  };
  return names;
}

// "layers.{i}.rest" -> {i, rest}; nullopt for another name.
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name) {
  const std::string prefix = "layers.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  const auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  return std::make_pair(name.substr(prefix.size(), dot - prefix.size()), name.substr(dot + 1));
}

std::string shape_of(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes().begin(), t.sizes().end(), ", "));
}

std::string where(const nlohmann::json& config) {
  return config.contains("model_type") && config["model_type"].is_string()
             ? fmt::format("config.json (model_type '{}')", config["model_type"].get<std::string>())
             : std::string("config.json");
}

bool has(const nlohmann::json& config, const char* key) {
  return config.contains(key) && !config[key].is_null();
}

int64_t get_int(const nlohmann::json& config, const char* key, std::optional<int64_t> fallback) {
  if (!has(config, key)) {
    if (fallback) return *fallback;
    throw CheckpointError(fmt::format("{}: missing required key '{}'", where(config), key));
  }
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    throw CheckpointError(fmt::format("{}: '{}' must be a positive integer, got {}", where(config),
                                      key, v.dump()));
  }
  return v.get<int64_t>();
}

double get_number(const nlohmann::json& config, const char* key, std::optional<double> fallback) {
  if (!has(config, key)) {
    if (fallback) return *fallback;
    throw CheckpointError(fmt::format("{}: missing required key '{}'", where(config), key));
  }
  const auto& v = config[key];
  if (!v.is_number()) {
    throw CheckpointError(fmt::format("{}: '{}' must be a number, got {}", where(config), key,
                                      v.dump()));
  }
  return v.get<double>();
}

bool get_bool(const nlohmann::json& config, const char* key, bool fallback) {
  if (!has(config, key)) return fallback;
  if (!config[key].is_boolean()) {
    throw CheckpointError(fmt::format("{}: '{}' must be true or false, got {}", where(config), key,
                                      config[key].dump()));
  }
  return config[key].get<bool>();
}

std::optional<RopeScaling> rope_scaling(const nlohmann::json& config) {
  if (!has(config, "rope_scaling")) return std::nullopt;
  const auto& s = config["rope_scaling"];
  if (!s.is_object()) {
    throw CheckpointError(fmt::format("{}: 'rope_scaling' must be null or an object, got {}",
                                      where(config), s.dump()));
  }
  const char* type_key = s.contains("rope_type") ? "rope_type" : "type";
  const std::string type = s.value(type_key, std::string("default"));
  if (type == "default") return std::nullopt;
  if (type != "llama3") {
    throw CheckpointError(fmt::format("{}: rope_scaling type '{}' is not supported (supported: "
                                      "default, llama3)",
                                      where(config), type));
  }
  RopeScaling r;
  r.factor = get_number(s, "factor", std::nullopt);
  r.low_freq_factor = get_number(s, "low_freq_factor", std::nullopt);
  r.high_freq_factor = get_number(s, "high_freq_factor", std::nullopt);
  r.original_max_position_embeddings = get_int(s, "original_max_position_embeddings", std::nullopt);
  return r;
}

// Qwen3-MoE's keys: every layer a softmax top-k mixture of experts.
MoEArgs moe_args(const nlohmann::json& config) {
  if (get_int(config, "decoder_sparse_step", 1) != 1 ||
      (has(config, "mlp_only_layers") && !config["mlp_only_layers"].empty())) {
    throw CheckpointError(fmt::format("{}: dense layers among the experts (decoder_sparse_step "
                                      "other than 1, or mlp_only_layers) are not supported",
                                      where(config)));
  }
  if (has(config, "shared_expert_intermediate_size") &&
      config["shared_expert_intermediate_size"] != 0) {
    throw CheckpointError(fmt::format("{}: 'shared_expert_intermediate_size' (Qwen2-MoE's shared "
                                      "expert) is not supported",
                                      where(config)));
  }
  MoEArgs m;
  m.num_experts = get_int(config, "num_experts", std::nullopt);
  m.top_k = get_int(config, "num_experts_per_tok", std::nullopt);
  m.hidden_dim = get_int(config, "moe_intermediate_size", std::nullopt);
  m.route_norm = get_bool(config, "norm_topk_prob", false);
  m.score_func = MoEArgs::ScoreFunc::Softmax;
  return m;
}

// Qwen3-MoE's keys for `m`; throws CheckpointError for what that layout cannot describe.
nlohmann::json moe_config(const MoEArgs& m) {
  if (m.score_func != MoEArgs::ScoreFunc::Softmax || m.num_shared_experts > 0 ||
      m.num_expert_groups > 0 || m.route_scale != 1.0 || m.score_before_experts) {
    throw CheckpointError("only a softmax top-k mixture of experts without shared experts, "
                          "groups, route_scale or score_before_experts has a Hugging Face "
                          "(Qwen3-MoE) config");
  }
  return {{"num_experts", m.num_experts},
          {"num_experts_per_tok", m.top_k},
          {"moe_intermediate_size", m.hidden_dim},
          {"norm_topk_prob", m.route_norm},
          {"decoder_sparse_step", 1},
          {"mlp_only_layers", nlohmann::json::array()}};
}

// A count that may be 0 (n_shared_experts, first_k_dense_replace).
int64_t get_count(const nlohmann::json& config, const char* key, int64_t fallback) {
  if (!has(config, key)) return fallback;
  const auto& v = config[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    throw CheckpointError(fmt::format("{}: '{}' must be an integer >= 0, got {}", where(config),
                                      key, v.dump()));
  }
  return v.get<int64_t>();
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
    throw CheckpointError(fmt::format("{}: rope_scaling type '{}' is not supported (supported: "
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
    throw CheckpointError(fmt::format("{}: yarn rope_scaling with mscale != mscale_all_dim (cos/sin "
                                      "scaled) is not supported",
                                      where(config)));
  }
  return y;
}

// DeepSeek-V3's keys (HF DeepseekV3Config): MLA, the first first_k_dense_replace layers dense and
// the rest sigmoid-scored, group-limited experts with shared experts.
void deepseek_v3_args(const nlohmann::json& config, TransformerArgs& a) {
  if (get_int(config, "num_key_value_heads", a.n_heads) != a.n_heads) {
    throw CheckpointError(fmt::format("{}: num_key_value_heads must equal num_attention_heads for "
                                      "MLA (one key and value per head)",
                                      where(config)));
  }
  if (!get_bool(config, "rope_interleave", true)) {
    throw CheckpointError(fmt::format("{}: rope_interleave = false is not supported",
                                      where(config)));
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
    throw CheckpointError("only sigmoid-scored experts weighted after the experts have a Hugging "
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

TransformerArgs args_from_hf_config(const nlohmann::json& config, bool qk_norm) {
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (get_bool(config, key, false)) {
      throw CheckpointError(fmt::format("{}: '{}' = true is not supported (titan's Transformer "
                                        "has no biases)",
                                        where(config), key));
    }
  }
  if (has(config, "hidden_act") && config["hidden_act"] != "silu") {
    throw CheckpointError(fmt::format("{}: hidden_act {} is not supported (supported: \"silu\")",
                                      where(config), config["hidden_act"].dump()));
  }
  TransformerArgs a;
  a.dim = get_int(config, "hidden_size", std::nullopt);
  a.n_layers = get_int(config, "num_hidden_layers", std::nullopt);
  a.n_heads = get_int(config, "num_attention_heads", std::nullopt);
  a.n_kv_heads = get_int(config, "num_key_value_heads", a.n_heads);
  if (!has(config, "head_dim") && a.dim % a.n_heads != 0) {
    throw CheckpointError(fmt::format("{}: hidden_size {} is not divisible by num_attention_heads "
                                      "{} and head_dim is not given",
                                      where(config), a.dim, a.n_heads));
  }
  a.head_dim = get_int(config, "head_dim", a.dim / a.n_heads);
  a.hidden_dim = get_int(config, "intermediate_size", std::nullopt);
  a.vocab_size = get_int(config, "vocab_size", std::nullopt);
  a.norm_eps = get_number(config, "rms_norm_eps", std::nullopt);
  a.rope_theta = get_number(config, "rope_theta", 10000.0);
  a.tie_embeddings = get_bool(config, "tie_word_embeddings", false);
  a.qk_norm = qk_norm;
  if (config.value("model_type", std::string()) == "deepseek_v3") {
    deepseek_v3_args(config, a);
    return a;
  }
  a.rope_scaling = rope_scaling(config);
  if (has(config, "num_experts")) a.moe = moe_args(config);
  return a;
}

nlohmann::json hf_config_from_args(const TransformerArgs& args, const std::string& model_type,
                                   const std::string& architecture) {
  nlohmann::json rope_scaling = nullptr;
  if (args.rope_scaling) {
    const auto& r = *args.rope_scaling;
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", r.factor},
                    {"low_freq_factor", r.low_freq_factor},
                    {"high_freq_factor", r.high_freq_factor},
                    {"original_max_position_embeddings", r.original_max_position_embeddings}};
  }
  nlohmann::json config = {{"architectures", {architecture}},
                            {"model_type", model_type},
                            {"hidden_size", args.dim},
                            {"intermediate_size", args.ffn_hidden()},
                            {"num_hidden_layers", args.n_layers},
                            {"num_attention_heads", args.n_heads},
                            {"num_key_value_heads", args.kv_heads()},
                            {"head_dim", args.head_size()},
                            {"vocab_size", args.vocab_size},
                            {"rms_norm_eps", args.norm_eps},
                            {"rope_theta", args.rope_theta},
                            {"rope_scaling", rope_scaling},
                            {"tie_word_embeddings", args.tie_embeddings},
                            {"hidden_act", "silu"},
                            {"attention_bias", false},
                            {"mlp_bias", false},
                            {"torch_dtype", "float32"}};
  if (args.mla) {
    config.update(deepseek_v3_config(args));
  } else if (args.moe) {
    config.update(moe_config(*args.moe));
  }
  return config;
}

std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(const std::string& name,
                                                              const torch::Tensor& value, bool mla) {
  if (auto it = top_level_names().find(name); it != top_level_names().end()) {
    return {{it->second, value}};
  }
  if (const auto layer = split_layer(name)) {
    const std::string hf_layer = "model.layers." + layer->first + ".";
    if (auto it = mla_layer_names().find(layer->second); mla && it != mla_layer_names().end()) {
      return {{hf_layer + it->second, value}};
    }
    if (auto it = layer_names().find(layer->second); it != layer_names().end()) {
      return {{hf_layer + it->second, value}};
    }
    if (auto it = expert_names().find(layer->second); it != expert_names().end()) {
      std::vector<std::pair<std::string, torch::Tensor>> out;
      for (int64_t j = 0; j < value.size(0); ++j) {
        out.emplace_back(fmt::format("{}mlp.experts.{}.{}", hf_layer, j, it->second),
                         value.select(0, j));
      }
      return out;
    }
  }
  throw CheckpointError(fmt::format("parameter '{}' has no Hugging Face name", name));
}

std::map<std::string, torch::Tensor> to_hf_state_dict(CausalLM& model) {
  const bool mla = dynamic_cast<Transformer&>(model).args().mla.has_value();
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model.named_parameters()) {
    for (auto& [name, view] : hf_tensors(item.key(), item.value(), mla)) out.emplace(name, view);
  }
  if (mla) {  // DeepSeek-V3 checkpoints carry the correction biases; Qwen3-MoE's have none
    for (const auto& item : model.named_buffers()) {
      for (auto& [name, view] : hf_tensors(item.key(), item.value(), mla)) out.emplace(name, view);
    }
  }
  return out;
}

void load_hf_state_dict(CausalLM& model, const std::map<std::string, torch::Tensor>& hf) {
  const auto targets = to_hf_state_dict(model);  // HF name -> the parameter (or its slice)
  const bool tied = targets.count("lm_head.weight") == 0;
  std::vector<std::string> problems;
  for (const auto& [name, param] : targets) {
    auto it = hf.find(name);
    if (it == hf.end()) {
      problems.push_back(fmt::format("missing '{}' (expected shape {})", name, shape_of(param)));
    } else if (it->second.sizes() != param.sizes()) {
      problems.push_back(fmt::format("'{}' has shape {}, the model expects {}", name,
                                     shape_of(it->second), shape_of(param)));
    }
  }
  const std::string rotary_suffix = "rotary_emb.inv_freq";
  for (const auto& [name, tensor] : hf) {
    const bool ignorable =
        (tied && name == "lm_head.weight") ||
        (name.size() >= rotary_suffix.size() &&
         name.compare(name.size() - rotary_suffix.size(), rotary_suffix.size(), rotary_suffix) == 0);
    if (!ignorable && targets.count(name) == 0) {
      problems.push_back(fmt::format("unexpected '{}' (shape {})", name, shape_of(tensor)));
    }
  }
  if (!problems.empty()) {
    throw CheckpointError(fmt::format("Hugging Face weights do not match the model: {}",
                                      fmt::join(problems, "; ")));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : targets) {
    param.copy_(hf.at(name));
  }
}

}  // namespace titan::models
