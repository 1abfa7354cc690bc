// What the launcher refuses before any worker starts (train::check_trainable): a final Hugging
// Face save of a flavor that has no Hugging Face form (the softmax-scored DeepSeek flavors),
// which would otherwise fail after training and leave the last checkpoint unfinished,
// expert-parallel degrees the model cannot use, and a profiling window longer than its
// profile_freq, each error naming its key.
#include <gtest/gtest.h>

#include "titan/config/resolve.h"
#include "titan/errors.h"
#include "titan/train/trainer.h"

namespace titan::train {
namespace unit_train_check_trainable_test {

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

// Expects check_trainable to refuse `args` on `world` ranks with a message containing `key`.
void expect_refused(const std::vector<std::string>& args, int world, const std::string& key) {
  const auto job = job_of(args);
  try {
    check_trainable(job, distributed::ParallelDims::from_config(job.parallelism, world));
    FAIL() << "no ConfigError for " << key;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(CheckTrainable, ExpertParallelDegreesTheModelCannotUse) {
  const std::vector<std::string> qwen = {"--module", "qwen3", "--config", "qwen3_moe_debugmodel",
                                         "--model.flavor", "debugmodel_moe_small"};
  auto with = [&](std::vector<std::string> extra, const std::vector<std::string>& base) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return extra;
  };
  // 8 experts over 3 ranks.
  expect_refused(with({"--parallelism.expert_parallel_degree", "3"}, qwen), 3,
                 "8 routed experts");
  // A dense model has nothing to split.
  expect_refused({"--module", "llama3", "--config", "llama3_debugmodel",
                  "--parallelism.expert_parallel_degree", "2"},
                 2, "no mixture-of-experts layer");
  // The tp ranks ep borrows must route different tokens.
  expect_refused(with({"--parallelism.expert_parallel_degree", "2",
                       "--parallelism.tensor_parallel_degree", "2",
                       "--parallelism.disable_sequence_parallel"},
                      qwen),
                 2, "disable_sequence_parallel");
  expect_refused(with({"--parallelism.tensor_parallel_degree", "2",
                       "--parallelism.expert_tensor_parallel_degree", "3"},
                      qwen),
                 2, "must be 1 or tensor_parallel_degree (2)");
  expect_refused(with({"--parallelism.tensor_parallel_degree", "2",
                       "--parallelism.expert_tensor_parallel_degree", "2"},
                      qwen),
                 2, "expert_tensor_parallel_degree = 2");
  const auto ok = job_of(with({"--parallelism.expert_parallel_degree", "2",
                               "--parallelism.tensor_parallel_degree", "2"},
                              qwen));
  EXPECT_NO_THROW(check_trainable(ok, distributed::ParallelDims::from_config(ok.parallelism, 4)));
}

TEST(CheckTrainable, ProfilingWindowMustFitItsFrequency) {
  const std::vector<std::string> llama = {"--module", "llama3", "--config", "llama3_debugmodel",
                                          "--profiling.enable_profiling"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), llama.begin(), llama.end());
    return extra;
  };
  // TorchTitan's defaults: 3 warmup steps and 1 active step in every 10.
  EXPECT_NO_THROW(check_trainable(job_of(llama), distributed::ParallelDims::from_config(
                                                     job_of(llama).parallelism, 1)));
  expect_refused(with({"--profiling.profile_freq", "3"}), 1, "profiling.profile_freq = 3");
  const auto fits = job_of(with({"--profiling.profile_freq", "3", "--profiling.profiler_warmup",
                                 "2"}));
  EXPECT_NO_THROW(
      check_trainable(fits, distributed::ParallelDims::from_config(fits.parallelism, 1)));
}

}  // namespace unit_train_check_trainable_test
}  // namespace titan::train
