#include "titan/components/data/batch_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "titan/errors.h"

namespace titan::components::data {
namespace unit_components_data_batch_layout_test {

TEST(BatchLayout, DefaultGlobalBatchIsLocalTimesDp) {
  BatchLayout layout(8, -1, 1, 4);
  EXPECT_EQ(layout.global_batch_size(), 32);
  EXPECT_EQ(layout.accumulation_steps(), 1);
}

TEST(BatchLayout, OrdinalFollowsTheDocumentedFormula) {
  // G = 24 = b 2 x dp 3 x A 4; step 5, microbatch 2, rank 1, row 1: 5*24 + 2*3*2 + 1*2 + 1.
  BatchLayout layout(2, 24, 1, 3);
  EXPECT_EQ(layout.accumulation_steps(), 4);
  EXPECT_EQ(layout.ordinal(5 * 24, 2, 1), 5 * 24 + 12 + 2 + 1);
  EXPECT_EQ(layout.ordinal(7, 0, 0), 7 + 2);  // after 7 samples (another batch size before)
}

TEST(BatchLayout, EveryPositionOfAStepIsTakenExactlyOnce) {
  const int64_t G = 16;
  for (int64_t dp : {1, 2, 4}) {
    for (int64_t accumulation : {1, 2, 4}) {
      const int64_t b = G / (dp * accumulation);
      std::vector<int> taken(G, 0);
      for (int64_t rank = 0; rank < dp; ++rank) {
        BatchLayout layout(b, G, rank, dp);
        ASSERT_EQ(layout.accumulation_steps(), accumulation);
        for (int64_t m = 0; m < accumulation; ++m) {
          for (int64_t row = 0; row < b; ++row) ++taken[layout.ordinal(3 * G, m, row) - 3 * G];
        }
      }
      for (int count : taken) {
        EXPECT_EQ(count, 1) << "dp " << dp << " accumulation " << accumulation;
      }
    }
  }
}

TEST(BatchLayout, RejectsImpossibleLayouts) {
  EXPECT_THROW(BatchLayout(0, -1, 0, 1), ConfigError);
  EXPECT_THROW(BatchLayout(4, 12, 0, 2), ConfigError);  // 12 is not a multiple of 8
  EXPECT_THROW(BatchLayout(4, -2, 0, 2), ConfigError);
  EXPECT_THROW(BatchLayout(4, 8, 2, 2), ConfigError);   // rank outside [0, 2)
  try {
    BatchLayout(4, 12, 0, 2);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("training.global_batch_size"), std::string::npos);
  }
  BatchLayout layout(2, 8, 0, 2);
  EXPECT_THROW(layout.ordinal(-1, 0, 0), std::out_of_range);
  EXPECT_THROW(layout.ordinal(0, 2, 0), std::out_of_range);
  EXPECT_THROW(layout.ordinal(0, 0, 2), std::out_of_range);
}

}  // namespace unit_components_data_batch_layout_test
}  // namespace titan::components::data
