#include "titan/components/tokenizer/hf_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <limits>

#include "titan/components/tokenizer/bpe_tokenizer.h"
#include "titan/components/tokenizer/byte_level.h"
#include "titan/components/tokenizer/hf_components.h"
#include "titan/components/tokenizer/tokenizer_files.h"
#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace {

// Rejects BPE options that change results and that titan does not implement.
void check_model(const json& model) {
  auto type = model.find("type");
  if (type != model.end() && *type != "BPE") {
    throw DataError(fmt::format("model.type: unsupported model '{}' (titan reads BPE only)",
                                type->is_string() ? type->get<std::string>() : type->dump()));
  }
  auto dropout = model.find("dropout");
  if (dropout != model.end() && dropout->is_number() && dropout->get<double>() > 0) {
    throw DataError("model.dropout: BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      throw DataError(fmt::format("model.{}: a non-empty value is not supported", key));
    }
  }
}

void check_decoder(const json& doc) {
  auto decoder = doc.find("decoder");
  std::string type = "null";
  if (decoder != doc.end() && decoder->is_object())
    type = string_field(*decoder, "type", "decoder");
  if (type != "ByteLevel") {
    throw DataError(fmt::format(
        "decoder.type: '{}' is not supported (titan reads byte-level BPE: decoder ByteLevel)",
        type));
  }
}

// `value` as a token id: an integer in [0, 2^31).
int32_t as_id(const json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    throw DataError(
        fmt::format("{}: the id must be an integer in [0, 2^31), got {}", where, value.dump()));
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

Vocab vocab_from_json(const json& entries) {
  if (!entries.is_object()) throw DataError("model.vocab: expected an object (token -> id)");
  Vocab vocab;
  for (const auto& item : entries.items()) {
    const std::string& token = item.key();
    const int32_t id = as_id(item.value(), fmt::format("model.vocab['{}']", token));
    auto bytes = byte_level_to_bytes(token);
    bool added = bytes ? vocab.add(id, *bytes) : vocab.add(id, token, /*encodable=*/false);
    if (!added) {
      throw DataError(fmt::format("model.vocab['{}']: id {} or its bytes appear twice", token, id));
    }
  }
  return vocab;
}

// The id model.vocab gives `key` as written (how HF looks up its unk_token).
std::optional<int32_t> vocab_key_id(const json& model, const std::string& key) {
  const json& entries = required_field(model, "vocab", "model");
  auto it = entries.find(key);
  if (it == entries.end()) return std::nullopt;
  return as_id(*it, fmt::format("model.vocab['{}']", key));
}

// The id of `token` (byte-level text) in `vocab`.
int32_t merge_part_id(const Vocab& vocab, const std::string& token, const std::string& where) {
  auto bytes = byte_level_to_bytes(token);
  std::optional<int32_t> id = bytes ? vocab.find(*bytes) : std::nullopt;
  if (!id) throw DataError(fmt::format("{}: '{}' is not in the vocabulary", where, token));
  return *id;
}

std::pair<std::string, std::string> merge_parts(const json& entry, const std::string& where) {
  if (entry.is_array() && entry.size() == 2) {
    return {as_string(entry[0], where + "[0]"), as_string(entry[1], where + "[1]")};
  }
  const std::string text = as_string(entry, where);
  const size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
    throw DataError(fmt::format("{}: '{}' is not two tokens separated by one space", where, text));
  }
  return {text.substr(0, space), text.substr(space + 1)};
}

std::vector<Merge> merges_from_json(const json& list, const Vocab& vocab) {
  std::vector<Merge> merges;
  merges.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("model.merges[{}]", i);
    auto [left, right] = merge_parts(list[i], where);
    int32_t left_id = merge_part_id(vocab, left, where);
    int32_t right_id = merge_part_id(vocab, right, where);
    int32_t result = merge_part_id(vocab, left + right, where);
    merges.push_back({left_id, right_id, result, static_cast<uint32_t>(i)});
  }
  return merges;
}

std::vector<AddedToken> added_tokens_from_json(const json& doc) {
  std::vector<AddedToken> tokens;
  auto list = doc.find("added_tokens");
  if (list == doc.end() || list->is_null()) return tokens;
  if (!list->is_array()) throw DataError("added_tokens: expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& entry = (*list)[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    const int32_t id = as_id(required_field(entry, "id", where), where + ".id");
    for (const char* key : {"lstrip", "rstrip", "single_word"}) {
      if (bool_field(entry, key, false, where)) {
        throw DataError(fmt::format("{}.{}: true is not supported", where, key));
      }
    }
    const bool special = bool_field(entry, "special", false, where);
    tokens.push_back({id, string_field(entry, "content", where), special,
                      bool_field(entry, "normalized", !special, where)});
  }
  return tokens;
}

// The text of a bos_token / eos_token entry: a string, {"content": ...}, or null / absent.
std::optional<std::string> config_token(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_object()) return string_field(*it, "content", key);
  return as_string(*it, key);
}

int32_t token_id(const BpeTokenizerParts& parts, const std::string& token, const char* key) {
  for (const AddedToken& t : parts.added_tokens) {
    if (t.content == token) return t.id;
  }
  auto bytes = byte_level_to_bytes(token);
  if (auto id = bytes ? parts.model->vocab().find(*bytes) : std::nullopt) return *id;
  throw DataError(fmt::format("{}: '{}' is not a token of the tokenizer", key, token));
}

// Applies the tokenizer_config.json beside the tokenizer, if there is one.
void apply_config(const std::string& tokenizer_path, BpeTokenizerParts& parts) {
  const auto path =
      (std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json").string();
  if (!std::filesystem::exists(path)) return;
  const json config = parse_json_file(read_text_file(path), path);
  try {
    if (!config.is_object()) throw DataError("expected a JSON object");
    if (auto bos = config_token(config, "bos_token")) {
      parts.bos = token_id(parts, *bos, "bos_token");
    }
    if (auto eos = config_token(config, "eos_token")) {
      parts.eos = token_id(parts, *eos, "eos_token");
    }
    parts.match_special_tokens = !bool_field(config, "split_special_tokens", false, "config");
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path, e.what()));
  }
}

BpeTokenizerParts parts_from_json(const json& doc) {
  if (!doc.is_object()) throw DataError("expected a JSON object");
  const json& model = required_field(doc, "model", "tokenizer");
  check_model(model);
  check_decoder(doc);
  BpeTokenizerParts parts;
  Vocab vocab = vocab_from_json(required_field(model, "vocab", "model"));
  std::vector<Merge> merges = merges_from_json(array_field(model, "merges", "model"), vocab);
  BpeOptions options;
  options.ignore_merges = bool_field(model, "ignore_merges", false, "model");
  options.byte_fallback = bool_field(model, "byte_fallback", false, "model");
  options.fuse_unk = bool_field(model, "fuse_unk", false, "model");
  const auto unk = model.find("unk_token");
  const bool has_unk = unk != model.end() && !unk->is_null();
  if (has_unk) options.unk_id = vocab_key_id(model, as_string(*unk, "model.unk_token"));
  parts.model = std::make_unique<Bpe>(std::move(vocab), merges, options);
  if (has_unk && !options.unk_id && parts.model->missing_bytes() > 0) {
    throw DataError(fmt::format("model.unk_token: '{}' is not in the vocabulary and {} bytes have "
                                "no token; Hugging Face tokenizers fails on any text holding one",
                                unk->get<std::string>(), parts.model->missing_bytes()));
  }
  parts.added_tokens = added_tokens_from_json(doc);
  parts.normalizer = normalizer_from_json(doc.value("normalizer", json()), "normalizer");
  parts.pre_tokenizer =
      pre_tokenizer_from_json(doc.value("pre_tokenizer", json()), "pre_tokenizer");
  return parts;
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) {
  const json doc = parse_json_file(read_text_file(path), path);
  BpeTokenizerParts parts;
  try {
    parts = parts_from_json(doc);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}: {}", path, e.what()));
  }
  parts.description = "hf:" + path;
  apply_config(path, parts);
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace titan::components::tokenizer
