// The tiktoken loader on TITAN_SHARED_DATA/tokenizers/tiktoken_test/test_tiktoken.model (2000
// ranks; ranks 0..255 are the single bytes 0x00..0xFF).
#include "titan/components/tokenizer/tiktoken_tokenizer.h"

#include <gtest/gtest.h>

#include <map>

#include "titan/components/tokenizer/base64.h"
#include "titan/components/tokenizer/pretokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"

namespace titan::components {
namespace unit_components_tokenizer_tiktoken_tokenizer_test {

const std::string kModel =
    std::string(TITAN_SHARED_DATA) + "/tokenizers/tiktoken_test/test_tiktoken.model";

const Tokenizer& tok() {
  static auto loaded = load_tokenizer(kModel);
  return *loaded;
}

TEST(TiktokenTokenizer, SingleBytesMapToTheirRank) {
  for (int b = 0; b < 256; ++b) {
    const std::string text(1, static_cast<char>(b));
    EXPECT_EQ(tok().encode(text), std::vector<int32_t>{b}) << "byte " << b;
  }
}

TEST(TiktokenTokenizer, WholeTokensMapToTheirRank) {
  EXPECT_EQ(tok().encode(" the"), std::vector<int32_t>{262});
  EXPECT_EQ(tok().encode("the"), std::vector<int32_t>{407});
  EXPECT_EQ(tok().encode(" ought"), std::vector<int32_t>{1999});  // the last line
}

TEST(TiktokenTokenizer, MergesTheLowestRankedPairFirst) {
  // " hello": 'he' (257), then 'll' (286), then ' '+'he' (303); 'o' stays a byte.
  EXPECT_EQ(tok().encode(" hello"), (std::vector<int32_t>{303, 286, 111}));
  // "seeing": 'in' (259), 'ing' (274), 'se' (316).
  EXPECT_EQ(tok().encode("seeing"), (std::vector<int32_t>{316, 101, 274}));
}

TEST(TiktokenTokenizer, SpecialTokensFollowTheRanks) {
  EXPECT_EQ(tok().vocab_size(), 2000 + 256);
  EXPECT_EQ(tok().bos_id(), 2000);
  EXPECT_EQ(tok().eos_id(), 2001);
  EXPECT_EQ(tok().encode("<|eot_id|>"), std::vector<int32_t>{2009});
  EXPECT_EQ(tok().encode("<|reserved_special_token_250|>"), std::vector<int32_t>{2255});
  EXPECT_EQ(tok().decode({2000, 72, 2001}), "<|begin_of_text|>H<|end_of_text|>");
}

TEST(TiktokenTokenizer, RoundTripsText) {
  for (const std::string& text : std::vector<std::string>{
           "", "Hello, world!", "  two spaces\n\nand\r\nnewlines\t", "1234567890 3.14159",
           "naïve café, Ærøskøbing", "今天天气很好", "emoji 🍕👨‍👩‍👧 ok",
           "it's DON'T", "<|begin_of_text|>x<|eot_id|>",
           std::string("\xFF\xFE invalid \xC3", 13)}) {
    EXPECT_EQ(tok().decode(tok().encode(text)), text);
  }
}

// tiktoken's algorithm, spelled naively: merge the adjacent pair whose concatenation has the
// lowest rank (leftmost on a tie) until none has a rank; a piece that is a token is taken whole.
std::vector<int32_t> naive_bpe(std::string_view piece,
                               const std::map<std::string, int32_t, std::less<>>& ranks) {
  if (auto it = ranks.find(piece); it != ranks.end()) return {it->second};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (true) {
    size_t best = parts.size();
    int32_t best_rank = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && (best == parts.size() || it->second < best_rank)) {
        best = i;
        best_rank = it->second;
      }
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& p : parts) ids.push_back(ranks.find(p)->second);
  return ids;
}

TEST(TiktokenTokenizer, MatchesNaiveRankMergingOnACorpus) {
  std::map<std::string, int32_t, std::less<>> ranks;
  const std::string model = tokenizer::read_text_file(kModel);
  for (size_t start = 0; start < model.size();) {
    const size_t end = std::min(model.find('\n', start), model.size());
    const std::string line = model.substr(start, end - start);
    const size_t space = line.find(' ');
    ranks[*tokenizer::base64_decode(line.substr(0, space))] = std::stoi(line.substr(space + 1));
    start = end + 1;
  }
  const std::string text =
      tokenizer::read_text_file(std::string(TITAN_SHARED_DATA) + "/corpora/sotu.txt")
          .substr(0, 200000);
  tokenizer::PreTokens pieces;
  pieces.pieces.push_back(text);
  tokenizer::SplitPreTokenizer(tokenizer::kLlama3Pattern, false,
                               tokenizer::SplitBehavior::kIsolated, false)
      .apply(pieces);
  std::vector<int32_t> expected;
  for (std::string_view piece : pieces.pieces) {
    for (int32_t id : naive_bpe(piece, ranks)) expected.push_back(id);
  }
  EXPECT_EQ(tok().encode(text), expected);
}

}  // namespace unit_components_tokenizer_tiktoken_tokenizer_test
}  // namespace titan::components
