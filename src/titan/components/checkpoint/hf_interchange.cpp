#include "titan/components/checkpoint/hf_interchange.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <filesystem>
#include <set>

#include "titan/components/checkpoint/file_io.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/checkpoint/shard_writer.h"
#include "titan/errors.h"
#include "titan/models/common/causal_lm.h"
#include "titan/platform/logging.h"

namespace titan::components::checkpoint {
namespace {

namespace fs = std::filesystem;

struct ExportDtype {
  const char* name;
  torch::ScalarType dtype;
};
constexpr std::array<ExportDtype, 3> kExportDtypes = {{
    {"float32", torch::kFloat32},
    {"bfloat16", torch::kBFloat16},
    {"float16", torch::kFloat16},
}};

const char* export_dtype_name(torch::ScalarType dtype) {
  for (const auto& d : kExportDtypes) {
    if (d.dtype == dtype) return d.name;
  }
  throw ConfigError(fmt::format("export dtype {} is not one of float32, bfloat16, float16",
                                c10::toString(dtype)));
}

void check_model_type(const protocols::TrainSpec& spec, const nlohmann::json& config,
                      const std::string& hf_dir) {
  const auto& types = spec.hf_model_types;
  const std::string type = config.contains("model_type") && config["model_type"].is_string()
                               ? config["model_type"].get<std::string>()
                               : std::string("(none)");
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    throw CheckpointError(fmt::format("{}: model_type '{}' is not a {} model (expected: {})",
                                      (fs::path(hf_dir) / "config.json").string(), type, spec.name,
                                      fmt::join(types, ", ")));
  }
}

// Warns about each non-zero buffer of `model` that `hf` leaves out (Qwen3-MoE's expert biases:
// the Hugging Face model then routes without them).
void warn_unexported_buffers(models::CausalLM& model, const TensorMap& hf) {
  std::set<const void*> exported;
  for (const auto& [name, t] : hf) exported.insert(t.data_ptr());
  for (const auto& item : model.named_buffers()) {
    if (!exported.count(item.value().data_ptr()) && item.value().abs().max().item<double>() > 0) {
      log::warn("{} is not part of the Hugging Face format and is left out: the exported model "
                "chooses experts without it",
                item.key());
    }
  }
}

// Whether a key that config.json leaves out has, in Hugging Face, the value hf_config writes.
bool hf_default(const std::string& key, const nlohmann::json& expected,
                const nlohmann::json& config) {
  if (expected.is_null() || expected == false) return true;  // biases, rope_scaling
  const auto positive = [&](const char* k) {
    return config.contains(k) && config[k].is_number_integer() && config[k].get<int64_t>() > 0;
  };
  return key == "head_dim" && positive("hidden_size") && positive("num_attention_heads") &&
         expected == config["hidden_size"].get<int64_t>() /
                         config["num_attention_heads"].get<int64_t>();
}

}  // namespace

distributed::ShardedStateDict whole_model_state(models::CausalLM& model) {
  distributed::ShardedStateDict out;
  for (const auto& item : model.named_parameters())
    out.emplace(item.key(), distributed::whole(item.value()));
  for (const auto& item : model.named_buffers())
    out.emplace(item.key(), distributed::whole(item.value()));
  return out;
}

torch::ScalarType export_dtype(const std::string& name, const std::string& key) {
  std::vector<std::string> valid;
  for (const auto& d : kExportDtypes) {
    if (name == d.name) return d.dtype;
    valid.push_back(d.name);
  }
  throw ConfigError(fmt::format("{}: '{}' is not an export dtype (valid: {})", key, name,
                                fmt::join(valid, ", ")));
}

void export_checkpoint_to_hf(const std::string& step_dir, const std::string& out_dir,
                             const HfExportOptions& options) {
  const CheckpointMetadata metadata = read_metadata(step_dir);
  const protocols::TrainSpec& spec = protocols::get_train_spec(metadata.model.family);
  auto model = spec.build(metadata.model.flavor);
  distributed::ShardedStateDict pieces = whole_model_state(*model);
  read_sections(step_dir, metadata, {{"model", &pieces}});
  nlohmann::json config = spec.hf_config(metadata.model.flavor);
  config["torch_dtype"] = export_dtype_name(options.dtype);
  const auto hf = spec.to_hf(*model);
  warn_unexported_buffers(*model, hf);
  write_hf_folder(out_dir, config, hf, options.dtype, options.max_shard_bytes);
}

std::string hf_config_difference(const protocols::TrainSpec& spec, const std::string& flavor,
                                 const nlohmann::json& config) {
  const nlohmann::json expected = spec.hf_config(flavor);
  for (const auto& [key, value] : expected.items()) {
    if (key == "torch_dtype" || key == "architectures") continue;
    if (!config.contains(key)) {
      if (!hf_default(key, value, config)) {
        return fmt::format("{} missing (flavor: {})", key, value.dump());
      }
    } else if (config[key] != value) {
      return fmt::format("{} = {} (flavor: {})", key, config[key].dump(), value.dump());
    }
  }
  return "";
}

std::string flavor_for_hf_config(const protocols::TrainSpec& spec, const nlohmann::json& config) {
  std::vector<std::string> differences;
  for (const auto& flavor : spec.flavors) {
    std::string difference;
    try {
      difference = hf_config_difference(spec, flavor, config);
    } catch (const CheckpointError& e) {
      difference = fmt::format("no Hugging Face config ({})", e.what());
    }
    if (difference.empty()) return flavor;
    differences.push_back(fmt::format("{}: {}", flavor, difference));
  }
  throw CheckpointError(fmt::format("config.json matches no {} flavor ({}); name one with "
                                    "--flavor",
                                    spec.name, fmt::join(differences, "; ")));
}

ModelIdentity import_hf_to_checkpoint(const std::string& hf_dir, const std::string& step_dir,
                                      const std::string& family, const std::string& flavor,
                                      int64_t step) {
  const protocols::TrainSpec& spec = protocols::get_train_spec(family);
  HfFolder folder = load_hf_folder(hf_dir);
  check_model_type(spec, folder.config, hf_dir);
  const ModelIdentity identity{family,
                               flavor.empty() ? flavor_for_hf_config(spec, folder.config) : flavor};
  auto model = spec.build(identity.flavor);
  if (const auto difference = hf_config_difference(spec, identity.flavor, folder.config);
      !difference.empty()) {
    throw CheckpointError(fmt::format("{}: does not describe {} '{}': {}",
                                      (fs::path(hf_dir) / "config.json").string(), family,
                                      identity.flavor, difference));
  }
  spec.from_hf(*model, folder.state_dict);
  const distributed::ShardedStateDict pieces = whole_model_state(*model);
  const std::string tmp = step_dir + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_rank_part(tmp, 0, {{"model", &pieces}}, nlohmann::json::object());
  finalize_checkpoint(tmp, 1, CheckpointHeader{step, identity, /*model_only=*/true});
  replace_directory(tmp, step_dir);
  return identity;
}

void load_hf_into_pieces(const std::string& hf_dir, const std::string& family,
                         distributed::ShardedStateDict& model) {
  const protocols::TrainSpec& spec = protocols::get_train_spec(family);
  HfFolder folder = load_hf_folder(hf_dir);
  check_model_type(spec, folder.config, hf_dir);
  auto full = spec.build_from_hf(folder.config);
  spec.from_hf(*full, folder.state_dict);
  const auto whole_state = whole_model_state(*full);  // Qwen3-MoE's biases: zeros
  torch::NoGradGuard no_grad;
  for (auto& [name, piece] : model) {
    distributed::check_piece(name, piece);
    auto it = whole_state.find(name);
    const torch::Tensor* param = it == whole_state.end() ? nullptr : &it->second.local;
    if (!param) {
      throw CheckpointError(fmt::format("{}: the Hugging Face model has no parameter for tensor "
                                        "'{}'",
                                        hf_dir, name));
    }
    if (param->sizes().vec() != piece.global_shape) {
      throw CheckpointError(fmt::format("{}: tensor '{}' has shape [{}] there, this run expects "
                                        "[{}]",
                                        hf_dir, name, fmt::join(param->sizes(), ", "),
                                        fmt::join(piece.global_shape, ", ")));
    }
    piece.local.copy_(piece.global_shape.empty()
                          ? *param
                          : param->narrow(0, piece.row_offset, distributed::local_rows(piece)));
  }
}

}  // namespace titan::components::checkpoint
