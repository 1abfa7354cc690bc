#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>
#include <map>
#include <optional>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/components/checkpoint/checkpoint_metadata.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/components/checkpoint/hf_interchange.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/models/common/generate.h"
#include "titan/protocols/train_spec.h"

namespace titan::cli {
namespace {

constexpr const char* kGenerateUsage =
    "Usage: titan generate (--hf_assets_path DIR | --checkpoint DIR/step-N)\n"
    "                      (--prompt_ids 1,2,3 | --prompt TEXT)\n"
    "                      [--tokenizer PATH] [--max_new_tokens N] [--temperature T]\n"
    "                      [--top_k K] [--seed S] [--score]\n"
    "  Loads a Hugging Face folder (config.json + safetensors; the family comes from\n"
    "  config.json's model_type) or a titan checkpoint (family and flavor from its metadata) and prints `ids: ...`, the generated ids (temperature 0 =\n"
    "  greedy), and `text: ...` when a tokenizer is available (--tokenizer, or a tokenizer.json /\n"
    "  tokenizer.model in DIR). --prompt encodes TEXT with BOS prepended when the tokenizer has\n"
    "  one. With --score, prints `loss: X`, the mean next-token cross-entropy of the prompt.\n";

struct GenerateArgs {
  std::string hf_assets_path;
  std::string checkpoint;
  std::string tokenizer_path;
  std::optional<std::string> prompt_text;
  std::vector<int64_t> prompt_ids;
  bool score = false;
  models::GenerateOptions options;
};

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    ids.push_back(std::strtoll(item.c_str(), &end, 10));
    if (item.empty() || *end != '\0') {
      throw ConfigError(fmt::format("generate: --prompt_ids: expected an integer, got '{}' (in "
                                    "'{}')",
                                    item, text));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

const FlagSpec& generate_flags() {
  static const FlagSpec spec{"generate",
                             {"hf_assets_path", "checkpoint", "prompt_ids", "prompt", "tokenizer",
                              "max_new_tokens", "temperature", "top_k", "seed"},
                             {"score"},
                             0,
                             kGenerateUsage};
  return spec;
}

GenerateArgs parse_generate_args(const Flags& flags) {
  GenerateArgs out;
  out.hf_assets_path = flags.get("hf_assets_path").value_or("");
  out.checkpoint = flags.get("checkpoint").value_or("");
  const bool have_ids = flags.has("prompt_ids");
  if (have_ids) out.prompt_ids = parse_ids(*flags.get("prompt_ids"));
  out.prompt_text = flags.get("prompt");
  out.tokenizer_path = flags.get("tokenizer").value_or("");
  out.score = flags.has("score");
  auto& o = out.options;
  o.max_new_tokens = flags.get_int("max_new_tokens", o.max_new_tokens);
  o.temperature = flags.get_double("temperature", o.temperature);
  o.top_k = flags.get_int("top_k", o.top_k);
  o.seed = static_cast<uint64_t>(flags.get_int("seed", static_cast<int64_t>(o.seed)));
  if (out.hf_assets_path.empty() == out.checkpoint.empty()) {
    throw ConfigError(fmt::format("generate: give exactly one of --hf_assets_path and "
                                  "--checkpoint\n{}",
                                  kGenerateUsage));
  }
  if (have_ids == out.prompt_text.has_value()) {
    throw ConfigError(fmt::format("generate: give exactly one of --prompt_ids and --prompt\n{}",
                                  kGenerateUsage));
  }
  return out;
}

// The tokenizer a checkpoint's run trained with: model.tokenizer_path (or hf_assets_path) of
// its config.toml, the built-in byte tokenizer when both are empty.
std::unique_ptr<components::Tokenizer> checkpoint_tokenizer(const std::string& dir) {
  auto path = std::filesystem::path(dir) / "config.toml";
  std::ifstream in(path);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  config::JobConfig job;
  config::apply_toml(job, text.str(), path.string());
  const auto& m = job.model;
  return components::load_tokenizer(m.tokenizer_path.empty() ? m.hf_assets_path
                                                             : m.tokenizer_path);
}

// The tokenizer named by --tokenizer, else the checkpoint's or one found in the model folder,
// else none.
std::unique_ptr<components::Tokenizer> find_tokenizer(const GenerateArgs& ga) {
  if (!ga.tokenizer_path.empty()) return components::load_tokenizer(ga.tokenizer_path);
  namespace fs = std::filesystem;
  if (!ga.checkpoint.empty()) return checkpoint_tokenizer(ga.checkpoint);
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    if (fs::exists(fs::path(ga.hf_assets_path) / name)) {
      return components::load_tokenizer(ga.hf_assets_path);
    }
  }
  return nullptr;
}

std::vector<int64_t> encode_prompt(const components::Tokenizer& tokenizer,
                                   const std::string& text) {
  std::vector<int64_t> ids;
  if (auto bos = tokenizer.bos_id()) ids.push_back(*bos);
  for (int32_t id : tokenizer.encode(text)) ids.push_back(id);
  return ids;
}

// The model of a titan checkpoint folder (any parallel layout), weights in float32.
std::shared_ptr<models::CausalLM> load_checkpoint_model(const std::string& dir) {
  namespace ckpt = components::checkpoint;
  auto metadata = ckpt::read_metadata(dir);
  const auto& spec = protocols::get_train_spec(metadata.model.family);
  auto model = spec.build(metadata.model.flavor);
  auto pieces = ckpt::whole_model_state(*model);  // the weights and the experts' biases
  torch::NoGradGuard no_grad;
  ckpt::read_sections(dir, metadata, {{"model", &pieces}});
  return model;
}

std::shared_ptr<models::CausalLM> load_hf_model(const std::string& dir) {
  auto folder = components::load_hf_folder(dir);
  const auto model_type = folder.config.value("model_type", std::string());
  const auto& spec = protocols::train_spec_for_hf_model_type(model_type);
  auto model = spec.build_from_hf(folder.config);
  spec.from_hf(*model, folder.state_dict);
  return model;
}

}  // namespace

int generate_command(const Args& args) {
  auto flags = Flags::parse(generate_flags(), args);
  GenerateArgs ga = parse_generate_args(flags);
  // The model first: a missing or broken checkpoint or model folder is named as such.
  auto model = ga.checkpoint.empty() ? load_hf_model(ga.hf_assets_path)
                                     : load_checkpoint_model(ga.checkpoint);
  auto tokenizer = find_tokenizer(ga);
  if (ga.prompt_text) {
    if (!tokenizer) {
      throw ConfigError("generate: --prompt needs a tokenizer: pass --tokenizer PATH (or "
                        "'byte' for the built-in byte tokenizer) or use a model folder holding "
                        "tokenizer.json / tokenizer.model");
    }
    ga.prompt_ids = encode_prompt(*tokenizer, *ga.prompt_text);
  }
  model->eval();
  if (ga.score) {
    std::cout << fmt::format("loss: {:.6f}\n", models::prompt_loss(*model, ga.prompt_ids));
    return 0;
  }
  const auto ids = models::generate(*model, ga.prompt_ids, ga.options);
  std::cout << fmt::format("ids: {}\n", fmt::join(ids, " "));
  if (tokenizer) {
    std::vector<int32_t> ids32(ids.begin(), ids.end());
    bool decodable = std::all_of(ids.begin(), ids.end(), [&](int64_t id) {
      return id >= 0 && id < tokenizer->vocab_size();
    });
    // A debug model's vocabulary (2048) is larger than the byte tokenizer's (258 ids).
    std::cout << (decodable ? "text: " + tokenizer->decode_text(ids32)
                            : fmt::format("text: (not shown: some ids are beyond the "
                                          "tokenizer's {} ids)",
                                          tokenizer->vocab_size()))
              << "\n";
  }
  return 0;
}

}  // namespace titan::cli
