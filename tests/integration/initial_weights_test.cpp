// Models are built on the meta device, parallelized, and only then does each rank allocate and
// initialise its own pieces (distributed/model_part.h). The full weights at step 0 must not
// depend on the layout: the seed checkpoints of 1 rank, FSDP 2, TP 2 and TP 2 x FSDP 2 (llama3;
// qwen3, with its q/k norms: 1 rank and TP 2 x FSDP 2), exported whole to Hugging Face
// safetensors, are byte-identical, and another training.seed gives other bytes (so the
// comparison can fail).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "support/training.h"

namespace titan {
namespace integration_initial_weights_test {

namespace fs = std::filesystem;

// The step-0 weights of `module`'s debug model trained under `env` / `args`, as the bytes of
// the Hugging Face export of its seed checkpoint.
std::string seed_weights(const std::string& module, const std::string& env,
                         const std::string& args) {
  auto dump = testing::make_temp_dir("titan_init");
  auto seed = testing::run_command(
      env + " " + testing::titan_binary() + " launch --module " + module + " --config " + module +
      "_debugmodel --training.seq_len 64 --checkpoint.enable --checkpoint.create_seed_checkpoint "
      "--training.dataset_path " + testing::shakespeare() + " --job.dump_folder " +
      dump.string() + " " + args);
  EXPECT_EQ(seed.exit_code, 0) << seed.output;
  auto hf = dump / "hf";
  auto convert = testing::run_command(testing::titan_binary() + " convert --to hf --checkpoint " +
                                      (dump / "checkpoint" / "step-0").string() + " --output " +
                                      hf.string());
  EXPECT_EQ(convert.exit_code, 0) << convert.output;
  std::ifstream in(hf / "model.safetensors", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(InitialWeights, EqualUnderEveryLayout) {
  for (const std::string module : {"llama3", "qwen3"}) {
    auto single = seed_weights(module, "NGPU=1", "");
    ASSERT_GT(single.size(), 1000000u) << module;
    if (module == "llama3") {
      EXPECT_TRUE(seed_weights(module, "NGPU=2", "") == single) << module << " FSDP 2";
      EXPECT_TRUE(seed_weights(module, "NGPU=2", "--parallelism.tensor_parallel_degree 2") ==
                  single)
          << module << " TP 2";
    }
    EXPECT_TRUE(seed_weights(module, "NGPU=4", "--parallelism.tensor_parallel_degree 2") ==
                single)
        << module << " TP 2 x FSDP 2";
    EXPECT_FALSE(seed_weights(module, "NGPU=1", "--training.seed 1") == single)
        << module << " another seed";
  }
}

}  // namespace integration_initial_weights_test
}  // namespace titan
