#include "titan/components/tokenizer/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "titan/errors.h"

namespace titan::components {
namespace unit_components_tokenizer_byte_tokenizer_test {

TEST(ByteTokenizer, LoadsForAnEmptyPathOrByte) {
  EXPECT_EQ(load_tokenizer("")->describe(), "byte");
  EXPECT_EQ(load_tokenizer("byte")->describe(), "byte");
}

TEST(ByteTokenizer, IdsAreBytesAndSpecialIdsFollow) {
  auto tok = load_tokenizer("byte");
  EXPECT_EQ(tok->encode("Az\n"), (std::vector<int32_t>{65, 122, 10}));
  EXPECT_EQ(tok->encode("\xC3\xA9"), (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_EQ(tok->vocab_size(), 258);
  EXPECT_EQ(tok->bos_id(), 256);
  EXPECT_EQ(tok->eos_id(), 257);
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  auto tok = load_tokenizer("byte");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(tok->decode(tok->encode(all)), all);
  EXPECT_EQ(tok->decode(tok->encode("héllo 🌍")), "héllo 🌍");
}

TEST(ByteTokenizer, DecodeDropsBosEosAndRejectsOtherIds) {
  auto tok = load_tokenizer("byte");
  EXPECT_EQ(tok->decode({256, 104, 105, 257}), "hi");
  EXPECT_THROW(tok->decode({258}), DataError);
  EXPECT_THROW(tok->decode({-1}), DataError);
}

// Ids that end inside a character: decode keeps the exact bytes, decode_text (what `generate`
// prints) shows U+FFFD as Hugging Face does, instead of writing invalid UTF-8 (issue 12).
TEST(ByteTokenizer, DecodeTextReplacesACutCharacter) {
  auto tok = load_tokenizer("byte");
  const std::vector<int32_t> cut = {104, 105, 0xE2, 0x82};  // "hi" + 2 of the 3 bytes of U+20AC
  EXPECT_EQ(tok->decode(cut), "hi\xE2\x82");
  EXPECT_EQ(tok->decode_text(cut), "hi\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode_text({104, 0xE2, 0x82, 0xAC}), "h\xE2\x82\xAC");
}

}  // namespace unit_components_tokenizer_byte_tokenizer_test
}  // namespace titan::components
