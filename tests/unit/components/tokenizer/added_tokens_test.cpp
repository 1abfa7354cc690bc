#include "titan/components/tokenizer/added_tokens.h"

#include <gtest/gtest.h>

namespace titan::components::tokenizer {
namespace unit_components_tokenizer_added_tokens_test {

std::vector<std::pair<std::string, int32_t>> split(const AddedTokenMatcher& m,
                                                   const std::string& text) {
  std::vector<Segment> segments;
  m.split(text, segments);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const Segment& s : segments) out.emplace_back(std::string(s.text), s.id);
  return out;
}

using Split = std::vector<std::pair<std::string, int32_t>>;

TEST(AddedTokenMatcher, LeftmostThenLongest) {
  AddedTokenMatcher m({{1, "<a>"}, {2, "<a><b>"}, {3, "b>"}});
  EXPECT_EQ(split(m, "x<a><b>y"), (Split{{"x", -1}, {"<a><b>", 2}, {"y", -1}}));
  EXPECT_EQ(split(m, "<a><c>b>"), (Split{{"<a>", 1}, {"<c>", -1}, {"b>", 3}}));
  EXPECT_EQ(split(m, "<a"), (Split{{"<a", -1}}));
  EXPECT_EQ(split(m, ""), Split{});
}

TEST(AddedTokenMatcher, NoTokensLeavesTextWhole) {
  AddedTokenMatcher m({});
  EXPECT_EQ(split(m, "<a>"), (Split{{"<a>", -1}}));
}

}  // namespace unit_components_tokenizer_added_tokens_test
}  // namespace titan::components::tokenizer
