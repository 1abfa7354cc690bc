#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "titan/cli/commands.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"

namespace titan::cli {
namespace {

constexpr const char* kTokenizeUsage =
    "Usage: titan tokenize --tokenizer PATH (--text TEXT | --file FILE)\n"
    "Prints the token ids of the text (no BOS/EOS) as one JSON array.\n"
    "PATH: tokenizer.json, a tiktoken .model file, a folder holding one, or 'byte'.\n";

struct TokenizeArgs {
  std::optional<std::string> tokenizer;
  std::optional<std::string> text;
  std::optional<std::string> file;
};

// Parses `--key value` / `--key=value` options; returns an error message, or "" when valid.
std::string parse(const Args& args, TokenizeArgs& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string key = args[i];
    std::optional<std::string> value;
    if (auto eq = key.find('='); key.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
    std::optional<std::string>* slot = key == "--tokenizer" ? &out.tokenizer
                                       : key == "--text"    ? &out.text
                                       : key == "--file"    ? &out.file
                                                            : nullptr;
    if (slot == nullptr) return fmt::format("unknown argument '{}'", key);
    if (!value) return fmt::format("{} needs a value", key);
    *slot = *value;
  }
  if (!out.tokenizer) return "--tokenizer is required";
  if (out.text.has_value() == out.file.has_value()) return "give exactly one of --text and --file";
  return "";
}

}  // namespace

int tokenize_command(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kTokenizeUsage;
    return 0;
  }
  TokenizeArgs options;
  if (std::string error = parse(args, options); !error.empty()) {
    std::cerr << "titan tokenize: " << error << "\n" << kTokenizeUsage;
    return 2;
  }
  auto tokenizer = components::load_tokenizer(*options.tokenizer);
  const std::string text =
      options.text ? *options.text : components::tokenizer::read_text_file(*options.file);
  std::cout << "[" << fmt::format("{}", fmt::join(tokenizer->encode(text), ",")) << "]\n";
  return 0;
}

}  // namespace titan::cli
