#include "titan/components/tokenizer/bpe.h"

#include <gtest/gtest.h>

#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace unit_components_tokenizer_bpe_test {

// Bytes 0..255 as ids 0..255, then the given tokens at 256, 257, ...
Vocab vocab_with(const std::vector<std::string>& tokens) {
  Vocab vocab;
  for (int b = 0; b < 256; ++b) vocab.add(b, std::string(1, static_cast<char>(b)));
  for (size_t i = 0; i < tokens.size(); ++i) vocab.add(256 + static_cast<int32_t>(i), tokens[i]);
  return vocab;
}

std::vector<int32_t> encode(const Bpe& bpe, std::string_view word) {
  std::vector<int32_t> ids;
  bpe.encode(word, ids);
  return ids;
}

TEST(Bpe, MergesByRankThenLeftmost) {
  // aa = 256 (rank 0), aaaa = 257 (rank 1).
  Bpe bpe(vocab_with({"aa", "aaaa"}), {{'a', 'a', 256, 0}, {256, 256, 257, 1}}, {});
  EXPECT_EQ(encode(bpe, "a"), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(encode(bpe, "aaa"), (std::vector<int32_t>{256, 'a'}));  // leftmost pair first
  EXPECT_EQ(encode(bpe, "aaaa"), (std::vector<int32_t>{257}));
  EXPECT_EQ(encode(bpe, "aaaaa"), (std::vector<int32_t>{257, 'a'}));
  EXPECT_EQ(encode(bpe, "baaaab"), (std::vector<int32_t>{'b', 257, 'b'}));
}

TEST(Bpe, LowerRankWinsOverPosition) {
  // bc (rank 0) beats ab (rank 1), so "abc" -> a, bc.
  Bpe bpe(vocab_with({"ab", "bc"}), {{'a', 'b', 256, 1}, {'b', 'c', 257, 0}}, {});
  EXPECT_EQ(encode(bpe, "abc"), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(encode(bpe, "abab"), (std::vector<int32_t>{256, 256}));
}

TEST(Bpe, IgnoreMergesTakesWholeTokens) {
  // "abc" is a token but no merge reaches it.
  const std::vector<Merge> merges = {{'a', 'b', 256, 0}};
  Bpe plain(vocab_with({"ab", "abc"}), merges, {});
  EXPECT_EQ(encode(plain, "abc"), (std::vector<int32_t>{256, 'c'}));
  BpeOptions options;
  options.ignore_merges = true;
  Bpe ignoring(vocab_with({"ab", "abc"}), merges, options);
  EXPECT_EQ(encode(ignoring, "abc"), (std::vector<int32_t>{257}));
}

TEST(Bpe, CachedWordsGiveTheSameIds) {
  Bpe bpe(vocab_with({"aa", "aaaa"}), {{'a', 'a', 256, 0}, {256, 256, 257, 1}}, {});
  const auto first = encode(bpe, "aaaaaaa");
  EXPECT_EQ(encode(bpe, "aaaaaaa"), first);
  EXPECT_EQ(first, (std::vector<int32_t>{257, 256, 'a'}));
}

// tiktoken files must spell every byte; a Hugging Face vocabulary may lack some (hf_tokenizer
// tests them against the Rust crate's ids).
TEST(Bpe, EveryByteNeedsATokenWhenRequired) {
  Vocab vocab;
  vocab.add(0, "a");
  BpeOptions tiktoken;
  tiktoken.require_every_byte = true;
  EXPECT_THROW(Bpe(std::move(vocab), {}, tiktoken), DataError);
}

// A missing byte is dropped (its neighbours then merge), or becomes the unknown token, one for
// a run of them with fuse_unk.
TEST(Bpe, MissingBytesAreDroppedOrUnknown) {
  const auto vocab = [] {
    Vocab v;
    v.add(0, "a");
    v.add(1, "b");
    v.add(2, "ab");
    return v;
  };
  const std::vector<Merge> merges = {{0, 1, 2, 0}};
  Bpe dropped(vocab(), merges, {});
  EXPECT_EQ(encode(dropped, "a\x01" "b"), (std::vector<int32_t>{2}));
  EXPECT_EQ(encode(dropped, "\x01"), (std::vector<int32_t>{}));
  BpeOptions unk;
  unk.unk_id = 7;
  Bpe unknown(vocab(), merges, unk);
  EXPECT_EQ(encode(unknown, "a\x01\x02" "b"), (std::vector<int32_t>{0, 7, 7, 1}));
  unk.fuse_unk = true;
  Bpe fused(vocab(), merges, unk);
  EXPECT_EQ(encode(fused, "a\x01\x02" "b"), (std::vector<int32_t>{0, 7, 1}));
  EXPECT_EQ(dropped.missing_bytes(), 254);
}

}  // namespace unit_components_tokenizer_bpe_test
}  // namespace titan::components::tokenizer
