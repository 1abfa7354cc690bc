// Pre-tokenization: cutting normalized text into pieces ("words") that BPE encodes one at a
// time, as the `pre_tokenizer` section of a Hugging Face tokenizer.json describes it.
// Stages: Split (a regex or literal, with a delimiter behaviour), ByteLevel (optional prefix
// space and GPT-2 split; the byte -> character mapping itself is not needed because titan's BPE
// works on raw bytes), and Sequence. Empty pieces are always dropped, as HF does.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "titan/components/tokenizer/regex.h"

namespace titan::components::tokenizer {

/// Pieces being pre-tokenized. Views point into the caller's text or into `owned` (text a
/// stage created, e.g. with a prefix space; a deque keeps those strings in place).
struct PreTokens {
  std::vector<std::string_view> pieces;
  std::deque<std::string> owned;
};

/// One pre-tokenizer stage. Immutable after construction; apply() is thread-safe.
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Replaces every piece by the pieces it splits into, keeping their order.
  virtual void apply(PreTokens& tokens) const = 0;
};

/// What a Split stage does with the text a pattern matches (HF SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // matches are dropped
  kIsolated,            // matches become pieces of their own
  kMergedWithPrevious,  // a match joins the piece before it
  kMergedWithNext,      // a match joins the piece after it
  kContiguous,          // runs of matches (and of non-matches) become one piece each
};

/// HF `Split`: cuts each piece at the matches of a pattern. With `invert` the pattern matches
/// the pieces to keep instead of the delimiters.
class SplitPreTokenizer final : public PreTokenizer {
 public:
  /// Throws DataError when the pattern does not compile.
  SplitPreTokenizer(const std::string& pattern, bool literal, SplitBehavior behavior, bool invert);
  void apply(PreTokens& tokens) const override;

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

/// HF `ByteLevel` pre-tokenizer: with `add_prefix_space` a piece not starting with ' ' gets
/// one; with `use_regex` pieces are split by GPT-2's pattern
/// ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), isolated.
class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void apply(PreTokens& tokens) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> gpt2_split_;  // null without use_regex
};

/// HF `Sequence`: the stages in order (none: the text is one piece).
class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> stages);
  void apply(PreTokens& tokens) const override;

 private:
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

}  // namespace titan::components::tokenizer
