// qwen3 family: flavors and sizes, and parity with the float64 reference of qwen3_tiny
// (q/k RMSNorm, head_dim 64 != hidden / heads, tied embeddings).
#include <gtest/gtest.h>

#include "../hf_parity.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/generate.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"
#include "titan/protocols/train_spec.h"

namespace titan {
namespace unit_models_qwen3_qwen3_test {

using testing::load_expected;
using testing::rel_err;
using testing::report;

// All 18 x 512 logits (8 decimals) to 1e-5 in float32 and to the rounding (5e-9) in float64;
// loss, grad norm and every tensor's grad norm; the 20 greedy ids; inv_freq.
void check_qwen3_tiny(torch::ScalarType dtype, double logit_tol, double rel_tol) {
  const auto expected = load_expected("qwen3_tiny");
  const std::string tag = std::string("qwen3_tiny ") + c10::toString(dtype);
  auto model = testing::load_hf_model("qwen3_tiny", dtype);
  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  EXPECT_TRUE(transformer.args().qk_norm);
  EXPECT_TRUE(transformer.args().tie_embeddings);
  EXPECT_EQ(transformer.args().head_size(), 64);

  auto r = testing::run_prompt(*model, testing::json_ids(expected["prompt"]["input_ids"]));
  std::vector<double> flat;
  for (const auto& row : expected["prompt"]["logits"]) {
    for (double v : row) flat.push_back(v);
  }
  auto want = torch::tensor(flat, torch::kFloat64).view(r.logits.sizes());  // want: [18, 512]
  const double max_logit_err = (r.logits - want).abs().max().item<double>();
  double max_param_err = 0.0;
  for (const auto& [name, norm] : expected["prompt"]["param_grad_norms"].items()) {
    ASSERT_TRUE(r.grad_norms.count(name)) << name;
    max_param_err = std::max(max_param_err, rel_err(r.grad_norms[name], norm.get<double>()));
  }
  EXPECT_EQ(r.grad_norms.size(), expected["prompt"]["param_grad_norms"].size());
  report(tag + " logits max abs err", max_logit_err);
  report(tag + " mean_loss rel err", rel_err(r.loss, expected["prompt"]["mean_loss"]));
  report(tag + " grad_norm rel err", rel_err(r.grad_norm, expected["prompt"]["grad_norm"]));
  report(tag + " param_grad_norms max rel err", max_param_err);
  EXPECT_LE(max_logit_err, logit_tol);
  EXPECT_LE(rel_err(r.loss, expected["prompt"]["mean_loss"]), rel_tol);
  EXPECT_LE(rel_err(r.grad_norm, expected["prompt"]["grad_norm"]), rel_tol);
  EXPECT_LE(max_param_err, 10 * rel_tol);

  models::GenerateOptions greedy;
  greedy.max_new_tokens = expected["greedy"]["num_new_tokens"];
  auto out = models::generate(*model, testing::json_ids(expected["greedy"]["start_ids"]), greedy);
  EXPECT_EQ(out, testing::json_ids(expected["greedy"]["ids"]));

  auto inv_freq = torch::tensor(expected["rope"]["inv_freq"].get<std::vector<double>>(),
                                torch::kFloat64);
  const double freq_err =
      ((transformer.inv_freq() - inv_freq).abs() / inv_freq).max().item<double>();
  report(tag + " rope.inv_freq max rel err", freq_err);
  EXPECT_LE(freq_err, 1e-12);
}

TEST(Qwen3Parity, Qwen3TinyFloat32) { check_qwen3_tiny(torch::kFloat32, 1e-5, 1e-5); }
TEST(Qwen3Parity, Qwen3TinyFloat64) { check_qwen3_tiny(torch::kFloat64, 5.1e-9, 1e-10); }

TEST(Qwen3Flavors, SizesMatchTheReleasedModels) {
  const auto& spec = protocols::get_train_spec("qwen3");
  EXPECT_EQ(spec.flavors,
            (std::vector<std::string>{"debugmodel", "0.6B", "1.7B", "4B", "8B", "14B", "32B",
                                      "debugmodel_moe", "30B-A3B", "235B-A22B",
                                      "debugmodel_moe_small"}));
  // 0.6B by hand (tied): per layer q 2048 x 1024, k, v 1024 x 1024, o 1024 x 2048, q/k norms
  // 128 each, FFN 3 x 1024 x 3072, two norms; plus one 151936 x 1024 embedding, final norm.
  const int64_t layer_06 = 2 * 2048 * 1024 + 2 * 1024 * 1024 + 256 + 3 * 1024 * 3072 + 2 * 1024;
  EXPECT_EQ(spec.build_on_device("0.6B", torch::kMeta)->num_params(),
            28 * layer_06 + 151936 * 1024 + 1024);
  EXPECT_EQ(28 * layer_06 + 151936 * 1024 + 1024, 596049920);  // Qwen3-0.6B's published count
  // 8B (untied): Qwen3-8B's 8,190,735,360 parameters.
  EXPECT_EQ(spec.build_on_device("8B", torch::kMeta)->num_params(), 8190735360);
  auto debug = spec.build("debugmodel");
  auto* block = debug->blocks().front().module;
  EXPECT_EQ(block->attention->as<models::AttentionImpl>()->options.head_dim, 128);
  EXPECT_EQ(debug->shape().vocab_size, 2048);
}

TEST(Qwen3Flavors, FlopsUseTheExplicitHeadDim) {
  auto model = protocols::get_train_spec("qwen3").build_on_device("0.6B", torch::kMeta);
  const int64_t params = 596049920, embedding = 151936 * 1024;
  EXPECT_EQ(model->flops_per_token(4096), 6 * (params - embedding) + int64_t{12} * 28 * 16 * 128 * 4096);
}

}  // namespace unit_models_qwen3_qwen3_test
}  // namespace titan
