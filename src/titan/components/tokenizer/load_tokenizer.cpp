#include <fmt/format.h>

#include <filesystem>

#include "titan/components/data/utf8.h"
#include "titan/components/tokenizer/byte_tokenizer.h"
#include "titan/components/tokenizer/hf_tokenizer.h"
#include "titan/components/tokenizer/tiktoken_tokenizer.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/errors.h"

namespace titan::components {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Tokenizer> load_from_folder(const std::filesystem::path& folder) {
  if (std::filesystem::exists(folder / "tokenizer.json")) {
    return tokenizer::load_hf_tokenizer((folder / "tokenizer.json").string());
  }
  if (std::filesystem::exists(folder / "tokenizer.model")) {
    return tokenizer::load_tiktoken_tokenizer((folder / "tokenizer.model").string());
  }
  throw DataError(fmt::format("{}: the folder holds neither tokenizer.json nor tokenizer.model",
                              folder.string()));
}

}  // namespace

std::string Tokenizer::decode_text(const std::vector<int32_t>& ids) const {
  return data::utf8_lossy(decode(ids));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path.empty() || path == "byte") return std::make_unique<tokenizer::ByteTokenizer>();
  if (std::filesystem::is_directory(path)) return load_from_folder(path);
  if (ends_with(path, ".json")) return tokenizer::load_hf_tokenizer(path);
  if (ends_with(path, ".model")) return tokenizer::load_tiktoken_tokenizer(path);
  if (!std::filesystem::exists(path)) {
    throw DataError(fmt::format("{}: no such tokenizer file or folder", path));
  }
  throw DataError(fmt::format(
      "{}: unknown tokenizer format (expected a .json or .model file, a folder, or 'byte')", path));
}

}  // namespace titan::components
