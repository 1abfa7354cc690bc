// Qwen3-MoE: parity with the float64 reference of qwen3_moe_tiny (every layer softmax top-2 over
// 8 experts with renormalised gates; q/k norms; head_dim 64 != hidden / heads; untied), routing
// token by token included, and the MoE flavors' sizes.
#include <gtest/gtest.h>

#include "../hf_parity.h"
#include "titan/models/common/generate.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rope.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"

namespace titan {
namespace {

using testing::load_expected;
using testing::rel_err;
using testing::report;

// Each MoE layer's routing of `ids`, from its router on the block's ffn_norm output.
std::map<std::string, models::Routing> routing_of(models::Transformer& model,
                                                  const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  auto h = model.tok_embeddings(torch::tensor(ids, torch::kInt64).unsqueeze(0));  // [1, T, dim]
  auto [cos, sin] = models::rope_cos_sin(model.inv_freq(), static_cast<int64_t>(ids.size()),
                                         h.scalar_type(), h.device());
  std::map<std::string, models::Routing> out;
  for (const auto& [layer, block] : model.blocks()) {
    h = h + block->attention->forward(block->attention_norm(h), cos, sin);
    auto n = block->ffn_norm(h);  // [1, T, dim]
    auto* moe = block->feed_forward->as<models::MoEImpl>();
    out[std::to_string(layer)] = moe->router(n.squeeze(0), moe->expert_bias);
    h = h + moe->forward(n);
  }
  return out;
}

void check_qwen3_moe_tiny(torch::ScalarType dtype, double logit_tol, double rel_tol,
                          double weight_tol) {
  const auto expected = load_expected("qwen3_moe_tiny");
  const std::string tag = std::string("qwen3_moe_tiny ") + c10::toString(dtype);
  auto model = testing::load_hf_model("qwen3_moe_tiny", dtype);
  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  ASSERT_TRUE(transformer.args().moe.has_value());
  EXPECT_EQ(transformer.args().moe->num_experts, 8);
  EXPECT_EQ(transformer.args().moe->top_k, 2);
  EXPECT_TRUE(transformer.args().moe->route_norm);
  EXPECT_FALSE(transformer.args().tie_embeddings);

  const auto ids = testing::json_ids(expected["prompt"]["input_ids"]);
  auto r = testing::run_prompt(*model, ids);
  std::vector<double> flat;
  for (const auto& row : expected["prompt"]["logits"]) {
    for (double v : row) flat.push_back(v);
  }
  auto want = torch::tensor(flat, torch::kFloat64).view(r.logits.sizes());  // want: [18, 512]
  const double max_logit_err = (r.logits - want).abs().max().item<double>();
  double max_param_err = 0.0;
  for (const auto& [name, norm] : expected["prompt"]["param_grad_norms"].items()) {
    ASSERT_TRUE(r.grad_norms.count(name)) << name;
    const double want_norm = norm.get<double>();
    max_param_err = std::max(max_param_err, want_norm == 0.0 ? r.grad_norms[name]
                                                             : rel_err(r.grad_norms[name], want_norm));
  }
  EXPECT_EQ(r.grad_norms.size(), expected["prompt"]["param_grad_norms"].size());
  report(tag + " logits max abs err", max_logit_err);
  report(tag + " mean_loss rel err", rel_err(r.loss, expected["prompt"]["mean_loss"]));
  report(tag + " grad_norm rel err", rel_err(r.grad_norm, expected["prompt"]["grad_norm"]));
  report(tag + " param_grad_norms max err", max_param_err);
  EXPECT_LE(max_logit_err, logit_tol);
  EXPECT_LE(rel_err(r.loss, expected["prompt"]["mean_loss"]), rel_tol);
  EXPECT_LE(rel_err(r.grad_norm, expected["prompt"]["grad_norm"]), rel_tol);
  EXPECT_LE(max_param_err, 10 * rel_tol);
  // Experts no token chose get no gradient at all (layer:expert 0:2, 1:0, 1:2).
  for (const char* idle : {"model.layers.0.mlp.experts.2.down_proj.weight",
                           "model.layers.1.mlp.experts.0.gate_proj.weight",
                           "model.layers.1.mlp.experts.2.up_proj.weight"}) {
    EXPECT_EQ(r.grad_norms[idle], 0.0) << idle;
  }

  double max_weight_err = 0.0;
  for (const auto& [layer, routing] : routing_of(transformer, ids)) {
    const auto& want_layer = expected["prompt"]["routing"]["layers"][layer];
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto want_experts = want_layer["selected_experts"][t].get<std::vector<int64_t>>();
      const auto want_weights = want_layer["combine_weights"][t].get<std::vector<double>>();
      for (size_t j = 0; j < want_experts.size(); ++j) {
        EXPECT_EQ(routing.experts[t][j].item<int64_t>(), want_experts[j])
            << "layer " << layer << " token " << t;
        max_weight_err = std::max(
            max_weight_err, std::abs(routing.gates[t][j].item<double>() - want_weights[j]));
      }
    }
  }
  report(tag + " combine weights max abs err", max_weight_err);
  EXPECT_LE(max_weight_err, weight_tol);

  models::GenerateOptions greedy;
  greedy.max_new_tokens = expected["greedy"]["num_new_tokens"];
  auto out = models::generate(*model, testing::json_ids(expected["greedy"]["start_ids"]), greedy);
  EXPECT_EQ(out, testing::json_ids(expected["greedy"]["ids"]));
}

// The README's float32 tolerances; float64 to the logits' 8-decimal rounding.
TEST(Qwen3MoeParity, Qwen3MoeTinyFloat32) { check_qwen3_moe_tiny(torch::kFloat32, 1e-4, 1e-5, 1e-5); }
TEST(Qwen3MoeParity, Qwen3MoeTinyFloat64) {
  check_qwen3_moe_tiny(torch::kFloat64, 5.1e-9, 1e-10, 1e-12);
}

TEST(Qwen3MoeFlavors, SizesCountEveryExpertAndFlopsTheActiveOnes) {
  const auto& spec = train::get_train_spec("qwen3");
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

}  // namespace
}  // namespace titan
