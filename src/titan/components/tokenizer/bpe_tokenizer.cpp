#include "titan/components/tokenizer/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>

#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace {

std::vector<AddedToken> matchable(const BpeTokenizerParts& parts, bool normalized) {
  std::vector<AddedToken> out;
  for (const AddedToken& t : parts.added_tokens) {
    if (t.normalized == normalized && (parts.match_special_tokens || !t.special)) {
      out.push_back(t);
    }
  }
  return out;
}

int64_t vocab_size_of(const BpeTokenizerParts& parts) {
  int64_t size = parts.model->vocab().end_id();
  for (const AddedToken& t : parts.added_tokens) size = std::max<int64_t>(size, t.id + 1);
  return size;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerParts parts)
    : parts_(std::move(parts)),
      raw_matcher_(matchable(parts_, false)),
      normalized_matcher_(matchable(parts_, true)),
      vocab_size_(vocab_size_of(parts_)) {
  for (const AddedToken& t : parts_.added_tokens) added_content_[t.id] = t.content;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<Segment> segments;
  raw_matcher_.split(text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_normalized(s.text, ids);
    }
  }
  return ids;
}

void BpeTokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  std::string storage;
  std::string_view normalized = parts_.normalizer.apply(text, storage);
  std::vector<Segment> segments;
  normalized_matcher_.split(normalized, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      out.push_back(s.id);
    } else {
      encode_plain(s.text, out);
    }
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  PreTokens tokens;
  tokens.pieces.push_back(text);
  if (parts_.pre_tokenizer) parts_.pre_tokenizer->apply(tokens);
  for (std::string_view piece : tokens.pieces) parts_.model->encode(piece, out);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  const Vocab& vocab = parts_.model->vocab();
  std::string text;
  for (int32_t id : ids) {
    if (auto it = added_content_.find(id); it != added_content_.end()) {
      text += it->second;
    } else if (vocab.contains(id)) {
      text += vocab.bytes(id);
    } else {
      throw DataError(fmt::format("{}: cannot decode id {}: not a token (vocab size {})",
                                  parts_.description, id, vocab_size_));
    }
  }
  return text;
}

}  // namespace titan::components::tokenizer
