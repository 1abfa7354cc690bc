// What the launcher refuses before any worker starts (train::check_trainable): here, a final
// Hugging Face save of a flavor that has no Hugging Face form (the softmax-scored DeepSeek
// flavors), which would otherwise fail after training and leave the last checkpoint unfinished.
#include <gtest/gtest.h>

#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/train/trainer.h"

namespace titan::train {
namespace {

config::JobConfig job_of(const std::vector<std::string>& args) {
  return config::resolve(config::parse_command_line(args));
}

TEST(CheckTrainable, LastSaveInHfNeedsAFlavorWithAHuggingFaceForm) {
  const std::vector<std::string> hf_save = {"--checkpoint.enable", "--checkpoint.last_save_in_hf",
                                            "--checkpoint.last_save_model_only"};
  auto deepseek = hf_save;
  deepseek.insert(deepseek.begin(), {"--module", "deepseek_v3", "--config", "deepseek_v3_debugmodel"});
  const auto job = job_of(deepseek);
  const auto dims = distributed::ParallelDims::from_config(job.parallelism, 1);
  try {
    check_trainable(job, dims);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.last_save_in_hf"), std::string::npos)
        << e.what();
  }
  auto qwen = hf_save;
  qwen.insert(qwen.begin(), {"--module", "qwen3", "--config", "qwen3_moe_debugmodel"});
  EXPECT_NO_THROW(check_trainable(job_of(qwen), dims));
}

}  // namespace
}  // namespace titan::train
