// Qwen3-MoE: parity with the float64 reference of qwen3_moe_tiny (every layer softmax top-2 over
// 8 experts with renormalised gates; q/k norms; head_dim 64 != hidden / heads; untied), routing
// token by token included, and the MoE flavors' sizes.
#include <gtest/gtest.h>

#include "../hf_parity.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"

namespace titan {
namespace unit_models_qwen3_qwen3_moe_test {

void check_qwen3_moe_tiny(torch::ScalarType dtype, const testing::MoeTolerances& tol) {
  auto model = testing::check_moe_parity("qwen3_moe_tiny", dtype, tol);
  const auto& args = dynamic_cast<models::Transformer&>(*model).args();
  ASSERT_TRUE(args.moe.has_value());
  EXPECT_EQ(args.moe->num_experts, 8);
  EXPECT_EQ(args.moe->top_k, 2);
  EXPECT_TRUE(args.moe->route_norm);
  EXPECT_FALSE(args.tie_embeddings);
}

// The README's float32 tolerances; float64 to the logits' 8-decimal rounding.
TEST(Qwen3MoeParity, Qwen3MoeTinyFloat32) { check_qwen3_moe_tiny(torch::kFloat32, {1e-4, 1e-5, 1e-5}); }
TEST(Qwen3MoeParity, Qwen3MoeTinyFloat64) {
  check_qwen3_moe_tiny(torch::kFloat64, {5.1e-9, 1e-10, 1e-12});
}

TEST(Qwen3MoeFlavors, SizesCountEveryExpertAndFlopsTheActiveOnes) {
  const auto& spec = protocols::get_train_spec("qwen3");
  // 30B-A3B by hand: per layer q 4096 x 2048, k, v 512 x 2048, o 2048 x 4096, q/k norms 128
  // each, two norms, router 128 x 2048, 128 experts of 3 x 768 x 2048; untied 151936 x 2048
  // embedding and output, final norm.
  const int64_t attention = 2 * 4096 * 2048 + 2 * 512 * 2048 + 256;
  const int64_t expert = 3 * 768 * 2048, router = 128 * 2048, norms = 2 * 2048;
  const int64_t embedding = int64_t{151936} * 2048;
  const int64_t total = 48 * (attention + norms + router + 128 * expert) + 2 * embedding + 2048;
  auto model = spec.build_on_device("30B-A3B", torch::kMeta);
  EXPECT_EQ(model->num_params(), total);
  // Active: 8 of 128 experts (Qwen's "A3B": 3.3B activated).
  const int64_t active = total - 48 * 120 * expert;
  const int64_t attention_flops = int64_t{12} * 48 * 32 * 128 * 4096;
  EXPECT_EQ(model->flops_per_token(4096), 6 * (active - embedding) + attention_flops);
  EXPECT_EQ(spec.build_on_device("235B-A22B", torch::kMeta)->blocks().size(), 94u);
  auto debug = spec.build_on_device("debugmodel_moe", torch::kMeta);
  auto* moe = debug->blocks().front().module->feed_forward->as<models::MoEImpl>();
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->args.num_experts, 64);
  EXPECT_EQ(moe->args.top_k, 8);
  EXPECT_EQ(moe->experts->w1->weight.sizes(), (std::vector<int64_t>{64, 768, 256}));
}

}  // namespace unit_models_qwen3_qwen3_moe_test
}  // namespace titan
