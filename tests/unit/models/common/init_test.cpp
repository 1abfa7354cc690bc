// Parameter initialisation: the counter-based generator against Random123's known answers,
// any piece of a parameter equal to the same rows of the whole one, and the distribution of
// the draws (mean, std, truncation) against the rule.
#include "titan/models/common/init.h"

#include <gtest/gtest.h>

#include <cmath>

namespace titan::models {
namespace unit_models_common_init_test {

// Random123 1.09, examples/kat_vectors: philox4x32 with 10 rounds.
TEST(Init, PhiloxMatchesRandom123KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Init, AnyPieceEqualsTheSameRowsOfTheWhole) {
  const auto rule = InitRule::trunc_normal(0.0, 0.02, -2.0, 2.0);
  auto whole = torch::empty({37, 129});
  init_rows(whole, 0, "layers.3.attention.wq.weight", rule, 42);
  for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 10}, {10, 19}, {36, 1}, {5, 0}}) {
    auto piece = torch::empty({rows, 129});
    init_rows(piece, first, "layers.3.attention.wq.weight", rule, 42);
    EXPECT_TRUE(torch::equal(piece, whole.narrow(0, first, rows))) << first;
  }
  // Another name or seed is another stream.
  auto other = torch::empty({37, 129});
  init_rows(other, 0, "layers.3.attention.wk.weight", rule, 42);
  EXPECT_FALSE(torch::equal(other, whole));
  init_rows(other, 0, "layers.3.attention.wq.weight", rule, 43);
  EXPECT_FALSE(torch::equal(other, whole));
}

// 2^20 draws: the sample mean is within 5 standard errors of the truncated normal's, the std
// within 1%, and no draw leaves [a, b].
TEST(Init, DrawsFollowTheRule) {
  auto t = torch::empty({1024, 1024}, torch::kFloat64);
  init_rows(t, 0, "w", InitRule::normal(0.0, 1.0), 7);
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 5.0 / 1024);
  EXPECT_NEAR(t.std().item<double>(), 1.0, 0.01);
  const double std = 0.5, cut = 0.5;  // cut at one std: the truncated std is 0.5 x 0.5396
  init_rows(t, 0, "w", InitRule::trunc_normal(1.0, std, 1.0 - cut, 1.0 + cut), 7);
  EXPECT_NEAR(t.mean().item<double>(), 1.0, 5.0 * 0.27 / 1024);
  EXPECT_NEAR(t.std().item<double>() / (std * 0.5396), 1.0, 0.01);
  EXPECT_GE(t.min().item<double>(), 1.0 - cut);
  EXPECT_LE(t.max().item<double>(), 1.0 + cut);
  init_rows(t, 0, "norm.weight", InitRule::ones(), 7);
  EXPECT_TRUE(torch::equal(t, torch::ones_like(t)));
}

}  // namespace unit_models_common_init_test
}  // namespace titan::models
