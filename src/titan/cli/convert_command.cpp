#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>
#include <regex>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/components/checkpoint/file_io.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/components/checkpoint/hf_interchange.h"
#include "titan/config/named_configs.h"
#include "titan/errors.h"
#include "titan/protocols/train_spec.h"

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
    "  config.json matches; the step recorded is N of the output folder's name step-N, else 0.\n"
    "  An --output that exists and is not empty is refused unless --overwrite is given.\n";

const FlagSpec& convert_flags() {
  static const FlagSpec spec{"convert",
                             {"to", "checkpoint", "output", "export_dtype", "max_shard_bytes",
                              "hf_assets_path", "module", "flavor"},
                             {"overwrite"},
                             0,
                             kConvertUsage};
  return spec;
}

// Refuses the flags of the other direction.
void refuse(const Flags& flags, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (flags.has(key)) {
      flags.fail(fmt::format("--{} does not apply to --to {}", key, *flags.get("to")));
    }
  }
}

int to_hf(const Flags& flags) {
  refuse(flags, {"hf_assets_path", "module", "flavor"});
  ckpt::HfExportOptions options;
  if (auto dtype = flags.get("export_dtype")) {
    options.dtype = ckpt::export_dtype(*dtype, "--export_dtype");
  }
  const int64_t max_bytes = flags.get_int("max_shard_bytes", options.max_shard_bytes);
  if (max_bytes <= 0) flags.fail("--max_shard_bytes must be positive");
  options.max_shard_bytes = static_cast<uint64_t>(max_bytes);
  const std::string& checkpoint = flags.required("checkpoint");
  const std::string& output = flags.required("output");
  // Written beside, then put in place: --overwrite replaces the folder (no stale shards stay),
  // and a failed export leaves the old one as it was.
  const std::string tmp = output + ".tmp";
  std::filesystem::remove_all(tmp);
  ckpt::export_checkpoint_to_hf(checkpoint, tmp, options);
  ckpt::replace_directory(tmp, output);
  std::cout << fmt::format("wrote Hugging Face folder {} from {}\n", output, checkpoint);
  return 0;
}

int to_titan(const Flags& flags) {
  refuse(flags, {"checkpoint", "export_dtype", "max_shard_bytes"});
  const std::string& hf_dir = flags.required("hf_assets_path");
  const std::string& output = flags.required("output");
  std::string family;
  if (auto module = flags.get("module")) {
    family = config::family_from_module(*module);
  } else {
    const auto hf_config = components::read_hf_config(hf_dir);
    family =
        protocols::train_spec_for_hf_model_type(hf_config.value("model_type", std::string())).name;
  }
  const std::string flavor = flags.get("flavor").value_or("");
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
  auto flags = Flags::parse(convert_flags(), args);
  const std::string to = flags.get("to").value_or("");
  if (to != "hf" && to != "titan") flags.fail("--to must be hf or titan");
  const std::string& output = flags.required("output");
  std::error_code ec;
  if (!flags.has("overwrite") && std::filesystem::exists(output) &&
      !(std::filesystem::is_directory(output) && std::filesystem::is_empty(output, ec))) {
    flags.fail(fmt::format("--output {} exists and is not empty: choose another folder, or pass "
                           "--overwrite to replace it",
                           output));
  }
  return to == "hf" ? to_hf(flags) : to_titan(flags);
}

}  // namespace titan::cli
