#include "titan/components/tokenizer/normalizer.h"

#include <gtest/gtest.h>

namespace titan::components::tokenizer {
namespace unit_components_tokenizer_normalizer_test {

std::string normalize(const Normalizer& n, const std::string& text) {
  std::string storage;
  return std::string(n.apply(text, storage));
}

TEST(Normalizer, IdentityByDefault) { EXPECT_EQ(normalize(Normalizer(), "e\u0301"), "e\u0301"); }

TEST(Normalizer, UnicodeForms) {
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFC}), "cafe\u0301"), "caf\u00E9");
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFD}), "caf\u00E9"), "cafe\u0301");
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFKC}), "\uFF11\u2460"), "11");
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFKD}), "\u00E9\uFB01"), "e\u0301fi");
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFD, UnicodeForm::kNFC}), "\u1100\u1161"),
            "\uAC00");
}

TEST(Normalizer, InvalidUtf8IsLeftAlone) {
  const std::string bad = "e\u0301\xFF";
  EXPECT_EQ(normalize(Normalizer({UnicodeForm::kNFC}), bad), bad);
}

}  // namespace unit_components_tokenizer_normalizer_test
}  // namespace titan::components::tokenizer
