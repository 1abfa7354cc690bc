#include "titan/components/data/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace titan::components::data {
namespace unit_components_data_utf8_test {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ASCII text, longer than eight bytes"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            std::nullopt);  // U+00E9, U+20AC, U+1F600, U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xED\x9F\xBF \xEE\x80\x80"), std::nullopt);  // around surrogates
}

TEST(Utf8, ReportsTheFirstBadByte) {
  EXPECT_EQ(find_invalid_utf8("abc\xFFxyz"), 3u);                 // never valid
  EXPECT_EQ(find_invalid_utf8("abcdefghij\x80"), 10u);            // lone continuation
  EXPECT_EQ(find_invalid_utf8("a\xC0\xAF"), 1u);                  // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xE0\x80\xAF"), 1u);              // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("a\xF0\x80\x80\xAF"), 1u);          // overlong 4-byte
  EXPECT_EQ(find_invalid_utf8("ab\xED\xA0\x80"), 2u);             // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);           // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("ok \xE2\x82"), 3u);                // cut short at the end
  EXPECT_EQ(find_invalid_utf8("ok \xE2(\xAC"), 3u);               // bad third byte
  EXPECT_EQ(find_invalid_utf8(std::string("nul\0ok", 6)), std::nullopt);  // NUL is valid
}

// Hugging Face's decode replaces what is not UTF-8 (Rust's from_utf8_lossy): one U+FFFD per
// maximal subpart, and the exact bytes stay available through Tokenizer::decode (issue 12).
TEST(Utf8, LossyReplacesEachMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(utf8_lossy("caf\xC3\xA9 \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(utf8_lossy("ok \xE2\x82"), "ok " + r);               // cut inside a character
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), r);                      // 3 of 4 bytes
  EXPECT_EQ(utf8_lossy("a\xE2\x82" "b"), "a" + r + "b");          // cut, then more text
  EXPECT_EQ(utf8_lossy("\xC0\x80"), r + r);                       // overlong: byte by byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);              // surrogate
  EXPECT_EQ(utf8_lossy("x\xFFy\x80"), "x" + r + "y" + r);
}

}  // namespace unit_components_data_utf8_test
}  // namespace titan::components::data
