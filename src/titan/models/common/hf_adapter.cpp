#include "titan/models/common/hf_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "titan/errors.h"
#include "titan/models/common/hf_config_keys.h"

namespace titan::models {
namespace {

using hf_keys::get_bool;
using hf_keys::get_int;
using hf_keys::get_number;
using hf_keys::has;
using hf_keys::where;

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

}  // namespace

TransformerArgs args_from_hf_config(const nlohmann::json& config, bool qk_norm,
                                    const HfDialect& dialect) {
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
  if (dialect.read_config) {
    dialect.read_config(config, a);
    return a;
  }
  a.rope_scaling = rope_scaling(config);
  if (has(config, "num_experts")) a.moe = moe_args(config);
  return a;
}

nlohmann::json hf_config_from_args(const TransformerArgs& args, const std::string& model_type,
                                   const std::string& architecture, const HfDialect& dialect) {
  if (args.feed_forward && !dialect.write_config) {
    throw CheckpointError(
        "a family's own feed-forward part (TransformerArgs::feed_forward) has no "
        "Hugging Face config.json unless the family's dialect writes one");
  }
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
  if (dialect.write_config) {
    config.update(dialect.write_config(args));
  } else if (args.moe) {
    config.update(moe_config(*args.moe));
  }
  return config;
}

std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(const std::string& name,
                                                              const torch::Tensor& value,
                                                              const HfDialect& dialect) {
  if (auto it = top_level_names().find(name); it != top_level_names().end()) {
    return {{it->second, value}};
  }
  if (const auto layer = split_layer(name)) {
    const std::string hf_layer = "model.layers." + layer->first + ".";
    if (auto it = dialect.layer_names.find(layer->second); it != dialect.layer_names.end()) {
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

std::map<std::string, torch::Tensor> to_hf_state_dict(CausalLM& model, const HfDialect& dialect) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model.named_parameters()) {
    for (auto& [name, view] : hf_tensors(item.key(), item.value(), dialect)) {
      out.emplace(name, view);
    }
  }
  if (dialect.buffers) {
    for (const auto& item : model.named_buffers()) {
      for (auto& [name, view] : hf_tensors(item.key(), item.value(), dialect)) {
        out.emplace(name, view);
      }
    }
  }
  return out;
}

void load_hf_state_dict(CausalLM& model, const std::map<std::string, torch::Tensor>& hf,
                        const HfDialect& dialect) {
  const auto targets = to_hf_state_dict(model, dialect);  // HF name -> the parameter (or its slice)
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
