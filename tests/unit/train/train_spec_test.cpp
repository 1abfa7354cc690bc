// The train-spec registry: names, lookups by name and by Hugging Face model_type, errors.
#include <gtest/gtest.h>

#include "titan/errors.h"
#include "titan/train/train_spec.h"

namespace titan::train {
namespace unit_train_train_spec_test {

TEST(TrainSpecRegistry, ListsFamilies) {
  EXPECT_EQ(train_spec_names(), (std::vector<std::string>{"llama3", "qwen3", "deepseek_v3"}));
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
  for (const auto& name : train_spec_names()) {
    auto model = get_train_spec(name).build("debugmodel");
    model->init_weights(0);
    auto logits = model->forward(torch::zeros({2, 5}, torch::kInt64));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 5, 2048})) << name;
  }
}

}  // namespace unit_train_train_spec_test
}  // namespace titan::train
