#include <fmt/format.h>

#include <iostream>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"

namespace titan::cli {
namespace {

constexpr const char* kTokenizeUsage =
    "Usage: titan tokenize --tokenizer PATH (--text TEXT | --file FILE)\n"
    "Prints the token ids of the text (no BOS/EOS) as one JSON array.\n"
    "PATH: tokenizer.json, a tiktoken .model file, a folder holding one, or 'byte'.\n";

const FlagSpec& tokenize_flags() {
  static const FlagSpec spec{"tokenize", {"tokenizer", "text", "file"}, {}, 0, kTokenizeUsage};
  return spec;
}

}  // namespace

int tokenize_command(const Args& args) {
  auto flags = Flags::parse(tokenize_flags(), args);
  if (flags.has("text") == flags.has("file")) flags.fail("give exactly one of --text and --file");
  auto tokenizer = components::load_tokenizer(flags.required("tokenizer"));
  const std::string text = flags.has("text")
                               ? *flags.get("text")
                               : components::tokenizer::read_text_file(*flags.get("file"));
  std::cout << "[" << fmt::format("{}", fmt::join(tokenizer->encode(text), ",")) << "]\n";
  return 0;
}

}  // namespace titan::cli
