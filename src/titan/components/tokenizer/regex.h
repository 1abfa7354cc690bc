// A compiled PCRE2 pattern for pre-tokenizer splits: UTF-8 with Unicode properties (PCRE2_UTF
// + PCRE2_UCP, so \s \d \w and \p{L} follow Unicode), JIT-compiled when PCRE2 can. Bytes that
// are not valid UTF-8 are never matched (PCRE2_MATCH_INVALID_UTF) instead of being an error.
// \s and \S mean Unicode White_Space, as in Oniguruma (which HF tokenizers uses) and Rust regex
// (tiktoken), not PCRE2's own set (which adds U+180E); \S inside a character class keeps
// PCRE2's meaning.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace titan::components::tokenizer {

/// Byte offsets [first, second) of one match.
using Span = std::pair<size_t, size_t>;

/// Immutable after construction; find_all() is thread-safe.
class Regex {
 public:
  /// Compiles `pattern`; with `literal` the pattern is plain text to find.
  /// Throws DataError quoting the pattern, PCRE2's message and the offset at fault.
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// Replaces `out` with the non-overlapping matches in `text`, left to right, searching `text`
  /// on its own (look-arounds do not see beyond it). After an empty match the search moves on
  /// by one character.
  void find_all(std::string_view text, std::vector<Span>& out) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

}  // namespace titan::components::tokenizer
