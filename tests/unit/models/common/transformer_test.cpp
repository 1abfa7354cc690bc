// The Transformer: TorchTitan names, tying, parameter counts, init_weights (deterministic
// under the seed; the stds and bounds of TorchTitan's init), and model parts (pipeline stages:
// blocks keyed by global layer id, the same weights and the same output as the whole model).
#include <gtest/gtest.h>

#include <cmath>

#include "titan/errors.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/transformer_block.h"

namespace titan::models {
namespace unit_models_common_transformer_test {

TransformerArgs small_args(bool tied) {
  TransformerArgs a;
  a.dim = 128;
  a.n_layers = 3;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.vocab_size = 3000;
  a.rope_theta = 500000.0;
  a.tie_embeddings = tied;
  return a;
}

double std_of(const torch::Tensor& t) { return t.to(torch::kFloat64).std().item<double>(); }

TEST(Transformer, NamesFollowTorchTitan) {
  Transformer model(small_args(false));
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.key());
  const std::vector<std::string> first = {
      "tok_embeddings.weight",          "layers.0.attention.wq.weight",
      "layers.0.attention.wk.weight",   "layers.0.attention.wv.weight",
      "layers.0.attention.wo.weight",   "layers.0.feed_forward.w1.weight",
      "layers.0.feed_forward.w2.weight", "layers.0.feed_forward.w3.weight",
      "layers.0.attention_norm.weight", "layers.0.ffn_norm.weight"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 10), first);
  EXPECT_EQ(names[names.size() - 2], "norm.weight");
  EXPECT_EQ(names.back(), "output.weight");
  EXPECT_EQ(model.blocks().size(), 3u);
}

TEST(Transformer, TiedModelHasOneClassifierMatrix) {
  Transformer untied(small_args(false)), tied(small_args(true));
  EXPECT_EQ(untied.num_params() - tied.num_params(), 3000 * 128);
  EXPECT_FALSE(tied.output);
  EXPECT_EQ(tied.named_parameters().find("output.weight"), nullptr);
  tied.init_weights(0);
  auto logits = tied.forward(torch::tensor({{1, 2, 3}}, torch::kInt64));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 3, 3000}));
}

TEST(Transformer, InitIsDeterministicInTheSeed) {
  Transformer a(small_args(false)), b(small_args(false)), c(small_args(false));
  a.init_weights(42);
  b.init_weights(42);
  c.init_weights(43);
  auto pb = b.named_parameters();
  auto pc = c.named_parameters();
  for (const auto& p : a.named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
    if (p.key().find("norm") == std::string::npos) {
      EXPECT_FALSE(torch::equal(p.value(), pc[p.key()])) << p.key();
    }
  }
}

// TorchTitan: embeddings N(0, 1); wq/wk/wv/w1 std 0.02; wo/w2/w3 std 0.02 / sqrt(2 (l + 1));
// output std dim^-0.5 truncated at 3 std (which shrinks the std by 1.35%); norms ones.
// Sample stds of >= 16k draws are within 2% of the target with overwhelming probability.
TEST(Transformer, InitStdsFollowTorchTitan) {
  auto args = small_args(false);
  Transformer model(args);
  model.init_weights(7);
  EXPECT_NEAR(std_of(model.tok_embeddings->weight), 1.0, 0.02);
  for (int64_t l = 0; l < args.n_layers; ++l) {
    auto& block = *model.layers[std::to_string(l)]->as<TransformerBlockImpl>();
    auto& attention = *block.attention->as<AttentionImpl>();
    auto& ffn = *block.feed_forward->as<FeedForwardImpl>();
    const double depth_std = 0.02 / std::sqrt(2.0 * (l + 1));
    EXPECT_NEAR(std_of(attention.wq->weight) / 0.02, 1.0, 0.02) << l;
    EXPECT_NEAR(std_of(attention.wk->weight) / 0.02, 1.0, 0.02) << l;
    EXPECT_NEAR(std_of(ffn.w1->weight) / 0.02, 1.0, 0.02) << l;
    EXPECT_NEAR(std_of(attention.wo->weight) / depth_std, 1.0, 0.02) << l;
    EXPECT_NEAR(std_of(ffn.w2->weight) / depth_std, 1.0, 0.02) << l;
    EXPECT_NEAR(std_of(ffn.w3->weight) / depth_std, 1.0, 0.02) << l;
    EXPECT_TRUE(torch::equal(block.attention_norm->weight, torch::ones({args.dim})));
  }
  const double out_std = 1.0 / std::sqrt(double(args.dim));
  EXPECT_NEAR(std_of(model.output->weight) / (out_std * 0.98654), 1.0, 0.02);
  EXPECT_LE(model.output->weight.abs().max().item<double>(), 3.0 * out_std + 1e-7);
  EXPECT_TRUE(torch::equal(model.norm->weight, torch::ones({args.dim})));
}

TEST(Transformer, TiedInitUsesTheOutputRule) {
  auto args = small_args(true);
  Transformer model(args);
  model.init_weights(7);
  const double out_std = 1.0 / std::sqrt(double(args.dim));
  EXPECT_NEAR(std_of(model.tok_embeddings->weight) / (out_std * 0.98654), 1.0, 0.02);
  EXPECT_LE(model.tok_embeddings->weight.abs().max().item<double>(), 3.0 * out_std + 1e-7);
}

TEST(Transformer, MetaDeviceGivesShapesWithoutMemory) {
  auto args = small_args(false);
  Transformer model(args, torch::TensorOptions().device(torch::kMeta));
  EXPECT_TRUE(model.tok_embeddings->weight.is_meta());
  EXPECT_EQ(model.num_embedding_params(), 3000 * 128);
}

TEST(Transformer, InvalidArgsNameTheField) {
  auto args = small_args(false);
  args.n_heads = 5;  // 128 % 5 != 0
  try {
    Transformer model(args);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("n_heads"), std::string::npos) << e.what();
  }
}

TEST(Transformer, PartsComputeTheWholeModel) {
  auto args = small_args(false);
  Transformer whole(args);
  Transformer first(args, torch::TensorOptions(), PartRange{0, 2, true, false});
  Transformer last(args, torch::TensorOptions(), PartRange{2, -1, false, true});
  for (auto* m : {&whole, &first, &last}) m->init_weights(11);
  EXPECT_FALSE(first.norm);
  EXPECT_FALSE(last.tok_embeddings);
  ASSERT_EQ(last.blocks().size(), 1u);
  EXPECT_EQ(last.blocks()[0].layer_id, 2);
  // Each part's parameters are the whole model's of the same name, initialised identically.
  auto all = whole.named_parameters();
  size_t count = 0;
  for (auto* part : {&first, &last}) {
    for (const auto& p : part->named_parameters()) {
      ASSERT_NE(all.find(p.key()), nullptr) << p.key();
      EXPECT_TRUE(torch::equal(p.value(), all[p.key()])) << p.key();
      ++count;
    }
  }
  EXPECT_EQ(count, all.size());
  auto tokens = torch::tensor({{5, 17, 256, 2999, 0, 42}}, torch::kInt64);
  auto hidden = first.forward(tokens);  // [1, 6, dim]
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{1, 6, args.dim}));
  EXPECT_TRUE(torch::equal(last.forward(hidden), whole.forward(tokens)));
}

TEST(Transformer, TiedEmbeddingsStayInOnePart) {
  EXPECT_THROW(Transformer(small_args(true), torch::TensorOptions(), PartRange{0, 2, true, false}),
               ConfigError);
  EXPECT_THROW(Transformer(small_args(false), torch::TensorOptions(), PartRange{2, 5, false, true}),
               ConfigError);
}

}  // namespace unit_models_common_transformer_test
}  // namespace titan::models
