// Sharded checkpoint files without the manager: per-rank writes (write_rank_part) for simulated
// ranks, rank 0's merge (finalize_checkpoint), and loads into other layouts (read_sections),
// compared exactly with the original tensors. Replicas are stored once; rows written twice or by
// no rank are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/process.h"
#include "support/sharded_state.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/checkpoint/shard_writer.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace unit_components_checkpoint_resharding_test {

namespace fs = std::filesystem;
using testing::FullState;

FullState model_state() {
  torch::manual_seed(3);
  FullState s;
  s["tok_embeddings.weight"] = torch::randn({37, 8});
  s["layers.0.attention.wq.weight"] = torch::randn({16, 8});
  s["layers.0.attention_norm.weight"] = torch::randn({8});
  s["norm.weight"] = torch::randn({3});                        // fewer rows than ranks
  s["bf16"] = torch::randn({9, 2, 3}).to(torch::kBFloat16);    // 3-d, another dtype
  s["empty"] = torch::zeros({0, 4});
  return s;
}

FullState optimizer_state() {
  torch::manual_seed(4);
  FullState s;
  s["exp_avg.tok_embeddings.weight"] = torch::randn({37, 8});
  s["exp_avg_sq.tok_embeddings.weight"] = torch::rand({37, 8});
  s["step"] = torch::tensor(int64_t{42});  // 0-dim: replicated
  return s;
}

// Writes `world` ranks' FSDP pieces of `model` and `optimizer` into `dir` and finalizes.
CheckpointMetadata write_checkpoint(const fs::path& dir, int world, const FullState& model,
                                    const FullState& optimizer) {
  fs::create_directories(dir);
  for (int r = 0; r < world; ++r) {
    const auto m = testing::fsdp_pieces(model, r, world);
    const auto o = testing::fsdp_pieces(optimizer, r, world);
    write_rank_part(dir.string(), r, {{"model", &m}, {"optimizer", &o}}, {{"rank", r}});
  }
  return finalize_checkpoint(dir.string(), world, CheckpointHeader{7, {"llama3", "debugmodel"}});
}

void expect_equal(const FullState& expected, const FullState& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_EQ(actual.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(actual.at(name), t)) << name;
  }
}

class Resharding : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("resharding"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Resharding, FourRanksLoadAsOneTwoAndThree) {
  const auto model = model_state();
  const auto optimizer = optimizer_state();
  const auto step_dir = dir_ / "step-7";
  const auto metadata = write_checkpoint(step_dir, 4, model, optimizer);
  EXPECT_EQ(metadata.world_size, 4);
  EXPECT_EQ(metadata.files.size(), 4u);
  EXPECT_EQ(metadata.sections.at("model").at("norm.weight").chunks.size(), 3u);  // rank 3: 0 rows
  EXPECT_FALSE(fs::exists(step_dir / "rank_0.json"));  // merged into metadata.json
  const auto read_back = read_metadata(step_dir.string());
  EXPECT_EQ(read_back.rank_states.at(2), nlohmann::json({{"rank", 2}}));

  for (int world : {1, 2, 3}) {
    std::vector<distributed::ShardedStateDict> models, optimizers;
    for (int r = 0; r < world; ++r) {
      models.push_back(testing::empty_pieces(model, r, world));
      optimizers.push_back(testing::empty_pieces(optimizer, r, world));
      read_sections(step_dir.string(), read_back,
                    {{"model", &models.back()}, {"optimizer", &optimizers.back()}});
    }
    SCOPED_TRACE("world " + std::to_string(world));
    expect_equal(model, testing::gather(models));
    expect_equal(optimizer, testing::gather(optimizers));
  }
}

TEST_F(Resharding, ReplicasAreWrittenOnce) {
  // HSDP: 2 replicas x 2 shards; only replica 0 writes. The norm is replicated on all 4 ranks.
  const auto model = model_state();
  const auto step_dir = dir_ / "step-1";
  fs::create_directories(step_dir);
  for (int r = 0; r < 4; ++r) {
    auto pieces = testing::fsdp_pieces(model, r % 2, 2, {"norm.weight"}, /*replica_writer=*/0);
    const bool replica0 = r < 2;
    for (auto& [name, p] : pieces) p.writer = p.writer && replica0;
    write_rank_part(step_dir.string(), r, {{"model", &pieces}}, nlohmann::json::object());
  }
  const auto metadata = finalize_checkpoint(step_dir.string(), 4, CheckpointHeader{1, {"a", "b"}});
  EXPECT_EQ(metadata.files.at("rank_2.bin").bytes, 0u);
  EXPECT_EQ(metadata.files.at("rank_3.bin").bytes, 0u);
  const auto& norm = metadata.sections.at("model").at("norm.weight");
  ASSERT_EQ(norm.chunks.size(), 1u);
  EXPECT_EQ(norm.chunks[0].file, "rank_0.bin");

  auto whole = testing::empty_pieces(model, 0, 1);
  read_sections(step_dir.string(), metadata, {{"model", &whole}});
  expect_equal(model, testing::gather({whole}));
}

TEST_F(Resharding, RowsWrittenTwiceAreRefused) {
  const auto model = model_state();
  const auto step_dir = dir_ / "step-1";
  fs::create_directories(step_dir);
  for (int r = 0; r < 2; ++r) {
    auto pieces = testing::fsdp_pieces(model, r, 2, {"norm.weight"}, /*replica_writer=*/r);
    pieces.at("norm.weight").writer = true;  // both replicas claim to write it
    write_rank_part(step_dir.string(), r, {{"model", &pieces}}, nlohmann::json::object());
  }
  try {
    finalize_checkpoint(step_dir.string(), 2, CheckpointHeader{1, {"a", "b"}});
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'norm.weight'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("written by both rank_0.bin and rank_1.bin"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Resharding, RowsWrittenByNoRankAreRefused) {
  const auto model = model_state();
  const auto step_dir = dir_ / "step-1";
  fs::create_directories(step_dir);
  for (int r = 0; r < 2; ++r) {
    auto pieces = testing::fsdp_pieces(model, r, 2);
    if (r == 1) pieces.at("tok_embeddings.weight").writer = false;
    write_rank_part(step_dir.string(), r, {{"model", &pieces}}, nlohmann::json::object());
  }
  try {
    finalize_checkpoint(step_dir.string(), 2, CheckpointHeader{1, {"a", "b"}});
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'tok_embeddings.weight': rows from 19 of 37 are "
                                         "written by no rank"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Resharding, MissingRankPartIsRefused) {
  const auto model = model_state();
  const auto step_dir = dir_ / "step-1";
  fs::create_directories(step_dir);
  const auto pieces = testing::fsdp_pieces(model, 0, 2);
  write_rank_part(step_dir.string(), 0, {{"model", &pieces}}, nlohmann::json::object());
  try {
    finalize_checkpoint(step_dir.string(), 2, CheckpointHeader{1, {"a", "b"}});
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("rank_1.json: missing"), std::string::npos) << e.what();
  }
}

TEST_F(Resharding, LoadsIntoAnotherDtypeAndRefusesMisfitPieces) {
  const auto model = model_state();
  const auto step_dir = dir_ / "step-7";
  const auto metadata = write_checkpoint(step_dir, 2, model, optimizer_state());

  distributed::ShardedStateDict as_double = {
      {"layers.0.attention.wq.weight",
       distributed::ShardedTensor{torch::zeros({4, 8}, torch::kFloat64), {16, 8}, 6}}};
  read_sections(step_dir.string(), metadata, {{"model", &as_double}});
  EXPECT_TRUE(torch::equal(as_double.at("layers.0.attention.wq.weight").local,
                           model.at("layers.0.attention.wq.weight").narrow(0, 6, 4).to(
                               torch::kFloat64)));

  distributed::ShardedStateDict misfit = {
      {"norm.weight", distributed::ShardedTensor{torch::zeros({2}), {3}, 2}}};
  try {
    read_sections(step_dir.string(), metadata, {{"model", &misfit}});
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'norm.weight': local piece of shape [2] at "
                                         "row_offset 2 does not fit the global shape [3]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace unit_components_checkpoint_resharding_test
}  // namespace titan::components::checkpoint
