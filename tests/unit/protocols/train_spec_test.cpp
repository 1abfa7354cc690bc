// The train-spec registry: names, lookups by name and by Hugging Face model_type, errors, and
// a family registered at run time (a plugin's or a test's) found like the built-in ones.
#include <gtest/gtest.h>

#include "titan/errors.h"
#include "titan/models/common/infra/transformer_train_spec.h"
#include "titan/models/common/transformer.h"
#include "titan/protocols/train_spec.h"

namespace titan::protocols {
namespace unit_protocols_train_spec_test {

TEST(TrainSpecRegistry, ListsFamilies) {
  const auto names = train_spec_names();  // a test may have registered more after them
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"llama3", "qwen3", "deepseek_v3"}));
  EXPECT_EQ(builtin_train_specs().size(), 3u);
  EXPECT_EQ(get_train_spec("qwen3").name, "qwen3");
  EXPECT_EQ(train_spec_for_hf_model_type("llama").name, "llama3");
  EXPECT_EQ(train_spec_for_hf_model_type("qwen3").name, "qwen3");
  EXPECT_EQ(train_spec_for_hf_model_type("qwen3_moe").name, "qwen3");
  EXPECT_EQ(train_spec_for_hf_model_type("deepseek_v3").name, "deepseek_v3");
}

TEST(TrainSpecRegistry, UnknownNamesListTheValidOnes) {
  try {
    get_train_spec("gpt2");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("llama3, qwen3"), std::string::npos) << e.what();
  }
  try {
    train_spec_for_hf_model_type("mistral");
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'mistral'"), std::string::npos) << e.what();
  }
}

TEST(TrainSpecRegistry, BuildsEveryDebugFlavor) {
  for (const auto& spec : builtin_train_specs()) {
    const auto& name = spec.name;
    auto model = get_train_spec(name).build("debugmodel");
    model->init_weights(0);
    auto logits = model->forward(torch::zeros({2, 5}, torch::kInt64));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 5, 2048})) << name;
  }
}

TEST(TrainSpecRegistry, RegistersAFamilyAtRunTime) {
  models::TransformerArgs tiny;
  tiny.dim = 32;
  tiny.n_layers = 1;
  tiny.n_heads = 2;
  tiny.vocab_size = 64;
  register_train_spec(models::transformer_train_spec(
      "unit_test_tiny", {{"tiny", tiny}}, {"unit_test_tiny", "UnitTestTiny", "", ""}, false));
  const auto names = train_spec_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "unit_test_tiny"), names.end());
  auto model = get_train_spec("unit_test_tiny").build("tiny");
  model->init_weights(0);
  EXPECT_EQ(model->forward(torch::zeros({1, 3}, torch::kInt64)).sizes(),
            (std::vector<int64_t>{1, 3, 64}));
  EXPECT_EQ(train_spec_for_hf_model_type("unit_test_tiny").name, "unit_test_tiny");
  EXPECT_THROW(register_train_spec(get_train_spec("llama3")), ConfigError);
}

}  // namespace unit_protocols_train_spec_test
}  // namespace titan::protocols
