#include "titan/components/tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

namespace titan::components::tokenizer {
namespace unit_components_tokenizer_pretokenizer_test {

std::vector<std::string> run(const PreTokenizer& stage, const std::string& text) {
  PreTokens tokens;
  tokens.pieces.push_back(text);
  stage.apply(tokens);
  return {tokens.pieces.begin(), tokens.pieces.end()};
}

using Pieces = std::vector<std::string>;

// HF tokenizers' documented example for SplitDelimiterBehavior.
TEST(SplitPreTokenizer, DelimiterBehaviors) {
  const std::string text = "the-final--countdown";
  auto split = [&](SplitBehavior b) { return run(SplitPreTokenizer("-", true, b, false), text); };
  EXPECT_EQ(split(SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithPrevious),
            (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
}

TEST(SplitPreTokenizer, InvertKeepsTheMatches) {
  SplitPreTokenizer words(R"(\p{L}+)", false, SplitBehavior::kRemoved, true);
  EXPECT_EQ(run(words, "héllo, wörld!"), (Pieces{"héllo", "wörld"}));
}

TEST(SplitPreTokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
  SplitPreTokenizer spaces(R"(\s+)", false, SplitBehavior::kRemoved, false);
  // U+3000 and U+0085 are white space; U+180E (a format character) is not.
  EXPECT_EQ(run(spaces, "a\u3000b\u0085c\u180Ed"), (Pieces{"a", "b", "c\u180Ed"}));
  SplitPreTokenizer non_spaces(R"(\S+)", false, SplitBehavior::kRemoved, false);
  EXPECT_EQ(run(non_spaces, "a\u180E b"), (Pieces{" "}));
  SplitPreTokenizer in_class(R"([^\s\[\]]+)", false, SplitBehavior::kRemoved, false);
  EXPECT_EQ(run(in_class, "a[b]\u180E c"), (Pieces{"[", "]", " "}));
}

TEST(SplitPreTokenizer, InvalidUtf8IsKeptNotMatched) {
  SplitPreTokenizer letters(R"(\p{L}+)", false, SplitBehavior::kIsolated, false);
  EXPECT_EQ(run(letters,
                "ab\xFF"
                "cd"),
            (Pieces{"ab", "\xFF", "cd"}));
}

TEST(ByteLevelPreTokenizer, Gpt2SplitAndPrefixSpace) {
  EXPECT_EQ(run(ByteLevelPreTokenizer(false, true), "Hello world's  123!!"),
            (Pieces{"Hello", " world", "'s", " ", " 123", "!!"}));
  EXPECT_EQ(run(ByteLevelPreTokenizer(true, true), "Hi there"), (Pieces{" Hi", " there"}));
  EXPECT_EQ(run(ByteLevelPreTokenizer(true, false), " a b"), (Pieces{" a b"}));
  EXPECT_EQ(run(ByteLevelPreTokenizer(true, false), "a b"), (Pieces{" a b"}));
}

TEST(SequencePreTokenizer, AppliesStagesInOrder) {
  std::vector<std::unique_ptr<PreTokenizer>> stages;
  stages.push_back(
      std::make_unique<SplitPreTokenizer>(R"(\d)", false, SplitBehavior::kIsolated, false));
  stages.push_back(std::make_unique<ByteLevelPreTokenizer>(true, false));
  EXPECT_EQ(run(SequencePreTokenizer(std::move(stages)), "ab12 c"),
            (Pieces{" ab", " 1", " 2", " c"}));
}

}  // namespace unit_components_tokenizer_pretokenizer_test
}  // namespace titan::components::tokenizer
