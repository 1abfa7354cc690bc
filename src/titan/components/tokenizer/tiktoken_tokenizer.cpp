#include "titan/components/tokenizer/tiktoken_tokenizer.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "titan/components/tokenizer/base64.h"
#include "titan/components/tokenizer/bpe_tokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"
#include "titan/errors.h"

namespace titan::components::tokenizer {

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

constexpr int kNumSpecialTokens = 256;

// Llama 3's special tokens in id order (TorchTitan's tiktoken tokenizer).
std::vector<std::string> llama3_special_tokens() {
  std::vector<std::string> names = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|reserved_special_token_2|>",
                                    "<|reserved_special_token_3|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|reserved_special_token_4|>",
                                    "<|eot_id|>"};
  for (int i = 5; names.size() < kNumSpecialTokens; ++i) {
    names.push_back(fmt::format("<|reserved_special_token_{}|>", i));
  }
  return names;
}

// Adds the token of one "base64 rank" line to `vocab`.
void parse_line(std::string_view line, Vocab& vocab) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
    throw DataError("expected 'base64-token rank'");
  }
  auto bytes = base64_decode(line.substr(0, space));
  if (!bytes || bytes->empty()) {
    throw DataError(fmt::format("'{}' is not base64 of a non-empty token", line.substr(0, space)));
  }
  const std::string_view rank_text = line.substr(space + 1);
  int32_t rank = -1;
  auto [end, error] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
  if (error != std::errc() || end != rank_text.data() + rank_text.size() || rank < 0 ||
      rank > std::numeric_limits<int32_t>::max() - kNumSpecialTokens) {
    throw DataError(fmt::format("rank '{}' is not a non-negative 32-bit integer", rank_text));
  }
  if (!vocab.add(rank, *bytes)) throw DataError("the token or its rank appeared before");
}

Vocab parse_ranks(const std::string& text, const std::string& path) {
  Vocab vocab;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    start = end + 1;
    if (line.empty()) continue;
    try {
      parse_line(line, vocab);
    } catch (const DataError& e) {
      throw DataError(fmt::format("{}:{}: {}", path, line_number, e.what()));
    }
  }
  if (vocab.size() == 0) throw DataError(fmt::format("{}: no tokens", path));
  return vocab;
}

// Every split of a token into two tokens merges into it at the token's rank (tiktoken merges
// the adjacent pair whose concatenation has the lowest rank).
std::vector<Merge> merges_of(const Vocab& vocab) {
  std::vector<Merge> merges;
  for (int32_t id = 0; id < vocab.end_id(); ++id) {
    if (!vocab.contains(id)) continue;
    std::string_view bytes = vocab.bytes(id);
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto left = vocab.find(bytes.substr(0, k));
      auto right = left ? vocab.find(bytes.substr(k)) : std::nullopt;
      if (right) merges.push_back({*left, *right, id, static_cast<uint32_t>(id)});
    }
  }
  return merges;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::string& path) {
  Vocab vocab = parse_ranks(read_text_file(path), path);
  BpeTokenizerParts parts;
  parts.description = "tiktoken:" + path;
  const int32_t first_special = vocab.end_id();
  std::vector<std::string> specials = llama3_special_tokens();
  for (size_t i = 0; i < specials.size(); ++i) {
    parts.added_tokens.push_back(
        {first_special + static_cast<int32_t>(i), specials[i], true, false});
  }
  parts.bos = first_special;
  parts.eos = first_special + 1;
  parts.pre_tokenizer =
      std::make_unique<SplitPreTokenizer>(kLlama3Pattern, false, SplitBehavior::kIsolated, false);
  BpeOptions options;
  options.ignore_merges = true;
  options.require_every_byte = true;
  std::vector<Merge> merges = merges_of(vocab);
  try {
    parts.model = std::make_unique<Bpe>(std::move(vocab), merges, options);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path, e.what()));
  }
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace titan::components::tokenizer
