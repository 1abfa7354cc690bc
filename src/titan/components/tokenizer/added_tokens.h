// Added tokens (special tokens such as <|begin_of_text|>, and other added tokens such as
// <think>): strings that map to one id wherever they appear in the text, found before
// pre-tokenization. Matching is leftmost, then longest (as HF tokenizers' Aho-Corasick
// LeftmostLongest), with a byte trie.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace titan::components::tokenizer {

/// One entry of tokenizer.json's `added_tokens` (or a tiktoken special token).
struct AddedToken {
  int32_t id;
  std::string content;
  bool special = true;      // a control token (BOS, EOS, chat markers...)
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

/// A stretch of text: either plain text (`id` < 0) or one added token.
struct Segment {
  std::string_view text;
  int32_t id;
};

/// Immutable after construction; split() is thread-safe.
class AddedTokenMatcher {
 public:
  /// Matches the non-empty contents of `tokens` (none: split() returns the text whole).
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  /// Appends to `out` the segments of `text`: plain stretches (never empty) and the added
  /// tokens between them.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // Longest token starting at text[pos]: its length and id, or length 0.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;

  bool first_bytes_[256] = {};
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> token_of_node_;           // node -> token id, -1 when none ends there
};

}  // namespace titan::components::tokenizer
