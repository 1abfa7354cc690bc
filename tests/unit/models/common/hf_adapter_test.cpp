// Hugging Face adapter: config.json -> arguments, name mapping both ways, and the errors for
// missing, unexpected and mis-shaped tensors and unsupported configs.
#include <gtest/gtest.h>

#include <fstream>

#include "titan/components/checkpoint/hf_folder.h"
#include "titan/errors.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/models/common/transformer.h"

namespace titan::models {
namespace unit_models_common_hf_adapter_test {

std::string dir(const std::string& name) { return std::string(TITAN_SHARED_DATA) + "/models/" + name; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "no CheckpointError";
}

TEST(HfAdapter, ArgsFromLlama3TinyConfig) {
  auto a = args_from_hf_config(components::read_hf_config(dir("llama3_tiny")), false);
  EXPECT_EQ(a.dim, 128);
  EXPECT_EQ(a.n_layers, 2);
  EXPECT_EQ(a.n_heads, 4);
  EXPECT_EQ(a.kv_heads(), 2);
  EXPECT_EQ(a.head_size(), 32);
  EXPECT_EQ(a.ffn_hidden(), 352);
  EXPECT_EQ(a.vocab_size, 512);
  EXPECT_DOUBLE_EQ(a.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(a.rope_theta, 500000.0);
  ASSERT_TRUE(a.rope_scaling);
  EXPECT_DOUBLE_EQ(a.rope_scaling->factor, 8.0);
  EXPECT_EQ(a.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_FALSE(a.tie_embeddings);
}

TEST(HfAdapter, NamesRoundTripWithTheFile) {
  auto folder = components::load_hf_folder(dir("qwen3_tiny"));
  Transformer model(args_from_hf_config(folder.config, true));
  load_hf_state_dict(model, folder.state_dict);
  auto hf = to_hf_state_dict(model);
  ASSERT_EQ(hf.size(), folder.state_dict.size());
  for (const auto& [name, tensor] : folder.state_dict) {
    ASSERT_TRUE(hf.count(name)) << name;
    EXPECT_TRUE(torch::equal(hf[name], tensor)) << name;
  }
  auto hf_name = [](const std::string& name) {
    const auto tensors = hf_tensors(name, torch::zeros({2, 3}));
    EXPECT_EQ(tensors.size(), 1u) << name;
    return tensors.front().first;
  };
  EXPECT_EQ(hf_name("layers.1.feed_forward.w2.weight"), "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(hf_name("layers.0.attention.k_norm.weight"), "model.layers.0.self_attn.k_norm.weight");
  EXPECT_THROW(hf_tensors("layers.0.attention.rope.weight", torch::zeros({1})), CheckpointError);
}

// lm_head differs from the embedding here, so a swapped or tied-the-wrong-way load shows.
TEST(HfAdapter, TiedModelIgnoresLmHead) {
  auto folder = components::load_hf_folder(dir("stories260K"));
  Transformer model(args_from_hf_config(folder.config, false));
  const auto embedding = folder.state_dict["model.embed_tokens.weight"];
  folder.state_dict["lm_head.weight"] = torch::zeros_like(embedding);
  EXPECT_NO_THROW(load_hf_state_dict(model, folder.state_dict));
  EXPECT_TRUE(torch::equal(model.tok_embeddings->weight, embedding));
}

TEST(HfAdapter, UntiedModelKeepsEmbeddingAndLmHeadApart) {
  auto folder = components::load_hf_folder(dir("llama3_tiny"));
  Transformer model(args_from_hf_config(folder.config, false));
  const auto embedding = folder.state_dict.at("model.embed_tokens.weight");
  const auto lm_head = folder.state_dict.at("lm_head.weight");
  ASSERT_FALSE(torch::equal(embedding, lm_head)) << "the reference must tell them apart";
  load_hf_state_dict(model, folder.state_dict);
  ASSERT_TRUE(model.output);
  EXPECT_TRUE(torch::equal(model.tok_embeddings->weight, embedding));
  EXPECT_TRUE(torch::equal(model.output->weight, lm_head));
}

TEST(HfAdapter, MismatchesAreListed) {
  auto folder = components::load_hf_folder(dir("llama3_tiny"));
  Transformer model(args_from_hf_config(folder.config, false));
  auto sd = folder.state_dict;
  sd.erase("model.layers.1.mlp.up_proj.weight");
  sd["model.layers.0.self_attn.q_proj.weight"] = torch::zeros({3, 3});
  sd["model.layers.0.self_attn.q_proj.bias"] = torch::zeros({128});
  const std::string msg = error_of([&] { load_hf_state_dict(model, sd); });
  EXPECT_NE(msg.find("missing 'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'model.layers.0.self_attn.q_proj.weight' has shape [3, 3], the model "
                     "expects [128, 128]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("unexpected 'model.layers.0.self_attn.q_proj.bias'"), std::string::npos) << msg;
}

TEST(HfAdapter, ConfigErrorsNameTheKey) {
  auto config = components::read_hf_config(dir("llama3_tiny"));
  auto missing = config;
  missing.erase("hidden_size");
  EXPECT_NE(error_of([&] { args_from_hf_config(missing, false); }).find("'hidden_size'"),
            std::string::npos);
  auto yarn = config;
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of([&] { args_from_hf_config(yarn, false); }).find("'yarn' is not supported"),
            std::string::npos);
  auto bias = config;
  bias["attention_bias"] = true;
  EXPECT_NE(error_of([&] { args_from_hf_config(bias, false); }).find("attention_bias"),
            std::string::npos);
  auto gelu = config;
  gelu["hidden_act"] = "gelu";
  EXPECT_NE(error_of([&] { args_from_hf_config(gelu, false); }).find("hidden_act"),
            std::string::npos);
}

}  // namespace unit_models_common_hf_adapter_test
}  // namespace titan::models
