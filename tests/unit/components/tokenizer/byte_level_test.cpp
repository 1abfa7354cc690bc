#include "titan/components/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include "titan/components/tokenizer/base64.h"

namespace titan::components::tokenizer {
namespace unit_components_tokenizer_byte_level_test {

TEST(ByteLevel, Gpt2Alphabet) {
  EXPECT_EQ(byte_level_char(' '), "\u0120");   // Ġ
  EXPECT_EQ(byte_level_char('\n'), "\u010A");  // Ċ
  EXPECT_EQ(byte_level_char('a'), "a");
  EXPECT_EQ(byte_level_char(0xAD), "\u0143");  // the last of the 68 remapped bytes
  EXPECT_EQ(byte_level_to_bytes("\u0120the\u010A"), " the\n");
}

TEST(ByteLevel, EveryByteRoundTrips) {
  std::string text, bytes;
  for (int b = 0; b < 256; ++b) {
    text += byte_level_char(static_cast<uint8_t>(b));
    bytes.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(byte_level_to_bytes(text), bytes);
}

TEST(ByteLevel, CharactersOutsideTheAlphabet) {
  EXPECT_EQ(byte_level_to_bytes(" "), std::nullopt);       // a raw space is not in it
  EXPECT_EQ(byte_level_to_bytes("\u00AD"), std::nullopt);  // soft hyphen is remapped
  EXPECT_EQ(byte_level_to_bytes("\uFF5C"), std::nullopt);  // fullwidth bar
  EXPECT_EQ(byte_level_to_bytes("\xC4"), std::nullopt);    // truncated UTF-8
}

TEST(Base64, DecodesPaddedText) {
  EXPECT_EQ(base64_decode("IG91Z2h0"), " ought");
  EXPECT_EQ(base64_decode("YW5jZXM="), "ances");
  EXPECT_EQ(base64_decode("AA=="), std::string(1, '\0'));
  EXPECT_EQ(base64_decode(""), "");
}

TEST(Base64, RejectsMalformedText) {
  EXPECT_EQ(base64_decode("YQ="), std::nullopt);   // length not a multiple of 4
  EXPECT_EQ(base64_decode("Y!=="), std::nullopt);  // not in the alphabet
  EXPECT_EQ(base64_decode("Y==="), std::nullopt);  // too much padding
  EXPECT_EQ(base64_decode("=AAA"), std::nullopt);  // padding first
}

}  // namespace unit_components_tokenizer_byte_level_test
}  // namespace titan::components::tokenizer
