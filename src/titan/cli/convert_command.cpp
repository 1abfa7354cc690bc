#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <regex>

#include "titan/cli/commands.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/components/checkpoint/hf_interchange.h"
#include "titan/config/named_configs.h"
#include "titan/errors.h"
#include "titan/train/train_spec.h"

namespace titan::cli {
namespace {

namespace ckpt = components::checkpoint;

constexpr const char* kConvertUsage =
    "Usage: titan convert --to hf --checkpoint DIR/step-N --output OUT\n"
    "                     [--export_dtype float32|bfloat16|float16] [--max_shard_bytes BYTES]\n"
    "       titan convert --to titan --hf_assets_path HF_DIR --output DIR/step-N\n"
    "                     [--module llama3] [--flavor F]\n"
    "  --to hf: writes the model of a titan checkpoint (any parallel layout) as a Hugging Face\n"
    "  folder: config.json and model.safetensors, or model-0000i-of-0000n.safetensors files with\n"
    "  model.safetensors.index.json when larger than --max_shard_bytes (default 5000000000).\n"
    "  --to titan: writes a Hugging Face folder as a one-rank, model-only titan checkpoint\n"
    "  (what checkpoint.initial_load_path or a checkpoint folder's step-N takes). The family\n"
    "  comes from --module or config.json's model_type, the flavor from --flavor or the one\n"
    "  config.json matches; the step recorded is N of the output folder's name step-N, else 0.\n";

using Options = std::map<std::string, std::string>;

Options parse(const Args& args) {
  static const std::vector<std::string> valid = {
      "to", "checkpoint", "output", "export_dtype", "max_shard_bytes", "hf_assets_path", "module",
      "flavor"};
  Options out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      throw ConfigError(fmt::format("convert: unexpected argument '{}'\n{}", arg, kConvertUsage));
    }
    std::string key = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      throw ConfigError(fmt::format("convert: unknown option --{} (valid: --{})", key,
                                    fmt::join(valid, ", --")));
    }
    if (!value) {
      if (i + 1 >= args.size()) throw ConfigError(fmt::format("convert: --{} needs a value", key));
      value = args[++i];
    }
    out[key] = *value;
  }
  return out;
}

const std::string& required(const Options& o, const std::string& key) {
  auto it = o.find(key);
  if (it == o.end() || it->second.empty()) {
    throw ConfigError(
        fmt::format("convert --to {}: --{} is required\n{}", o.at("to"), key, kConvertUsage));
  }
  return it->second;
}

void refuse(const Options& o, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (o.count(key)) {
      throw ConfigError(fmt::format("convert --to {}: --{} does not apply\n{}", o.at("to"), key,
                                    kConvertUsage));
    }
  }
}

uint64_t parse_bytes(const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v > 0) return static_cast<uint64_t>(v);
  } catch (const std::exception&) {
  }
  throw ConfigError(fmt::format("--max_shard_bytes: expected a positive integer, got '{}'", text));
}

int to_hf(const Options& o) {
  refuse(o, {"hf_assets_path", "module", "flavor"});
  ckpt::HfExportOptions options;
  if (o.count("export_dtype")) {
    options.dtype = ckpt::export_dtype(o.at("export_dtype"), "--export_dtype");
  }
  if (o.count("max_shard_bytes")) options.max_shard_bytes = parse_bytes(o.at("max_shard_bytes"));
  const std::string& checkpoint = required(o, "checkpoint");
  const std::string& output = required(o, "output");
  ckpt::export_checkpoint_to_hf(checkpoint, output, options);
  std::cout << fmt::format("wrote Hugging Face folder {} from {}\n", output, checkpoint);
  return 0;
}

int to_titan(const Options& o) {
  refuse(o, {"checkpoint", "export_dtype", "max_shard_bytes"});
  const std::string& hf_dir = required(o, "hf_assets_path");
  const std::string& output = required(o, "output");
  std::string family;
  if (o.count("module")) {
    family = config::family_from_module(o.at("module"));
  } else {
    const auto hf_config = components::read_hf_config(hf_dir);
    family = train::train_spec_for_hf_model_type(hf_config.value("model_type", std::string())).name;
  }
  const std::string flavor = o.count("flavor") ? o.at("flavor") : std::string();
  static const std::regex step_name("step-([0-9]+)");
  std::smatch m;
  const std::string name = std::filesystem::path(output).filename().string();
  const int64_t step = std::regex_match(name, m, step_name) ? std::stoll(m[1].str()) : 0;
  const auto identity = ckpt::import_hf_to_checkpoint(hf_dir, output, family, flavor, step);
  std::cout << fmt::format("wrote titan checkpoint {} ({} {}, step {}, model only) from {}\n",
                           output, identity.family, identity.flavor, step, hf_dir);
  return 0;
}

}  // namespace

int convert_command(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kConvertUsage;
    return 0;
  }
  const Options o = parse(args);
  auto to = o.find("to");
  if (to == o.end() || (to->second != "hf" && to->second != "titan")) {
    throw ConfigError(fmt::format("convert: --to must be hf or titan\n{}", kConvertUsage));
  }
  return to->second == "hf" ? to_hf(o) : to_titan(o);
}

}  // namespace titan::cli
