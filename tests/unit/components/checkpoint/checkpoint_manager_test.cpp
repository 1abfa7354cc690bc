// CheckpointManager: save / load round trips, keep_latest_k, crash leftovers (.tmp) ignored,
// async snapshots, exclude_from_loading, model-only last saves, initial_load_path, one refusal
// per kind of bad input (with its message), and real multi-process saves and loads under
// different world sizes (this test binary re-executed as the ranks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/process.h"
#include "support/sharded_state.h"
#include "titan/components/checkpoint/checkpoint_manager.h"
#include "titan/components/checkpoint/shard_writer.h"
#include "titan/errors.h"

namespace titan::components::checkpoint {
namespace unit_components_checkpoint_checkpoint_manager_test {

namespace fs = std::filesystem;
using testing::FullState;

const ModelIdentity kModel{"llama3", "debugmodel"};

FullState model_state(double shift = 0) {
  torch::manual_seed(11);
  FullState s;
  s["tok_embeddings.weight"] = torch::randn({21, 8}) + shift;
  s["layers.0.attention.wq.weight"] = torch::randn({16, 8}) + shift;
  s["norm.weight"] = torch::randn({8}) + shift;
  return s;
}

FullState optimizer_state(double shift = 0) {
  torch::manual_seed(12);
  FullState s;
  s["exp_avg.tok_embeddings.weight"] = torch::randn({21, 8}) + shift;
  s["exp_avg_sq.norm.weight"] = torch::rand({8}) + shift;
  return s;
}

nlohmann::json rank_state(int64_t step, int rank = 0) {
  return {{"train_state", {{"step", step}, {"rank", rank}}},
          {"lr_scheduler", {{"last_step", step}}},
          {"dataloader", {{"position", step * 4}}}};
}

config::CheckpointSection base_config() {
  config::CheckpointSection c;
  c.enable = true;
  c.interval = 1;
  c.keep_latest_k = 0;
  return c;
}

void expect_equal(const FullState& expected, const distributed::ShardedStateDict& pieces) {
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(pieces.count(name)) << name;
    EXPECT_TRUE(torch::equal(pieces.at(name).local, t)) << name;
  }
}

class Manager : public ::testing::Test {
 protected:
  void SetUp() override { dump_ = testing::make_temp_dir("checkpoint_manager"); }
  void TearDown() override { fs::remove_all(dump_); }

  std::unique_ptr<CheckpointManager> manager(const config::CheckpointSection& c,
                                             ModelIdentity model = kModel) {
    return std::make_unique<CheckpointManager>(c, dump_.string(), testing::group_of_one(), model);
  }
  void save(CheckpointManager& m, int64_t step, double shift = 0, bool last = false) {
    const auto model = testing::fsdp_pieces(model_state(shift), 0, 1);
    const auto optimizer = testing::fsdp_pieces(optimizer_state(shift), 0, 1);
    m.save(step, model, optimizer, rank_state(step), "[job]\ndump_folder = \"x\"\n", last);
  }
  // Loads into zeroed pieces; returns what load() returned.
  std::optional<LoadResult> load(CheckpointManager& m, distributed::ShardedStateDict& model,
                                 distributed::ShardedStateDict& optimizer, nlohmann::json& state) {
    model = testing::empty_pieces(model_state(), 0, 1);
    optimizer = testing::empty_pieces(optimizer_state(), 0, 1);
    return m.load(model, optimizer, state);
  }
  // The CheckpointError message of loading with `m`, or "no CheckpointError".
  std::string load_error(CheckpointManager& m) {
    distributed::ShardedStateDict model, optimizer;
    nlohmann::json state;
    try {
      load(m, model, optimizer, state);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no CheckpointError";
  }
  fs::path step_dir(int64_t step) const {
    return dump_ / "checkpoint" / ("step-" + std::to_string(step));
  }

  fs::path dump_;
};

TEST_F(Manager, RoundTripOneRank) {
  auto m = manager(base_config());
  save(*m, 10);
  EXPECT_TRUE(fs::exists(step_dir(10) / "metadata.json"));
  EXPECT_TRUE(fs::exists(step_dir(10) / "rank_0.bin"));
  EXPECT_TRUE(fs::exists(step_dir(10) / "config.toml"));
  EXPECT_FALSE(fs::exists(step_dir(10).string() + ".tmp"));
  const auto metadata = read_metadata(step_dir(10).string());
  EXPECT_EQ(metadata.step, 10);
  EXPECT_EQ(metadata.model, kModel);
  EXPECT_FALSE(metadata.model_only);
  EXPECT_TRUE(metadata.files.count("config.toml"));
  EXPECT_EQ(metadata.files.at("rank_0.bin").sha256.size(), 64u);

  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state = {{"other", 1}};
  auto result = load(*m, model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 10);
  EXPECT_FALSE(result->model_only);
  EXPECT_EQ(result->path, step_dir(10).string());
  expect_equal(model_state(), model);
  expect_equal(optimizer_state(), optimizer);
  EXPECT_EQ(state["train_state"]["step"], 10);
  EXPECT_EQ(state["dataloader"]["position"], 40);
  EXPECT_EQ(state["other"], 1);  // keys the checkpoint does not hold stay
}

TEST_F(Manager, NothingToLoad) {
  auto m = manager(base_config());
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  EXPECT_FALSE(load(*m, model, optimizer, state));
  auto c = base_config();
  c.enable = false;
  save(*m, 1);
  EXPECT_FALSE(load(*manager(c), model, optimizer, state));  // disabled: never loads
}

TEST_F(Manager, ShouldSave) {
  auto c = base_config();
  c.interval = 5;
  auto m = manager(c);
  EXPECT_FALSE(m->should_save(4, 12));
  EXPECT_TRUE(m->should_save(5, 12));
  EXPECT_TRUE(m->should_save(10, 12));
  EXPECT_TRUE(m->should_save(12, 12));
  c.enable = false;
  EXPECT_FALSE(manager(c)->should_save(5, 12));
}

TEST_F(Manager, LoadsTheLatestOrLoadStep) {
  auto m = manager(base_config());
  save(*m, 1, 0.0);
  save(*m, 2, 1.0);
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  EXPECT_EQ(load(*m, model, optimizer, state)->step, 2);
  expect_equal(model_state(1.0), model);
  auto c = base_config();
  c.load_step = 1;
  EXPECT_EQ(load(*manager(c), model, optimizer, state)->step, 1);
  expect_equal(model_state(0.0), model);
  c.load_step = 9;
  EXPECT_NE(load_error(*manager(c)).find("checkpoint.load_step = 9 but there is no step-9 "
                                          "(complete checkpoints: 1, 2)"),
            std::string::npos);
}

TEST_F(Manager, KeepLatestK) {
  auto c = base_config();
  c.keep_latest_k = 2;
  auto m = manager(c);
  for (int step = 1; step <= 4; ++step) save(*m, step);
  EXPECT_FALSE(fs::exists(step_dir(1)));
  EXPECT_FALSE(fs::exists(step_dir(2)));
  EXPECT_TRUE(fs::exists(step_dir(3)));
  EXPECT_TRUE(fs::exists(step_dir(4)));
  c.keep_latest_k = 0;
  auto keep_all = manager(c);
  for (int step = 5; step <= 7; ++step) save(*keep_all, step);
  for (int step = 3; step <= 7; ++step) EXPECT_TRUE(fs::exists(step_dir(step))) << step;
}

TEST_F(Manager, CrashLeftoversAreIgnoredThenCleared) {
  auto m = manager(base_config());
  save(*m, 1);
  // A save of step 2 killed after writing its rank file, before the rename.
  fs::create_directories(step_dir(2).string() + ".tmp");
  fs::copy_file(step_dir(1) / "rank_0.bin", step_dir(2).string() + ".tmp/rank_0.bin");
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  auto result = load(*m, model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 1);
  save(*m, 3);
  EXPECT_FALSE(fs::exists(step_dir(2).string() + ".tmp"));  // cleared once step 3 is complete
  EXPECT_EQ(load(*m, model, optimizer, state)->step, 3);
}

TEST_F(Manager, SavingAnExistingStepReplacesIt) {
  auto m = manager(base_config());
  save(*m, 1, 0.0);
  save(*m, 1, 2.0);
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  load(*m, model, optimizer, state);
  expect_equal(model_state(2.0), model);
  EXPECT_FALSE(fs::exists(step_dir(1).string() + ".old.tmp"));
}

TEST_F(Manager, AsyncSaveWritesASnapshotAndCompletesOnWait) {
  auto c = base_config();
  c.async_mode = "async";
  auto m = manager(c);
  auto model = testing::fsdp_pieces(model_state(), 0, 1);
  auto optimizer = testing::fsdp_pieces(optimizer_state(), 0, 1);
  m->save(5, model, optimizer, rank_state(5), "", /*last=*/false);
  for (auto& [name, p] : model) p.local.add_(100.0);  // training goes on
  EXPECT_FALSE(fs::exists(step_dir(5)));               // completes at wait() / the next save
  m->wait();
  EXPECT_TRUE(fs::exists(step_dir(5) / "metadata.json"));
  m->save(6, model, optimizer, rank_state(6), "", /*last=*/false);
  m.reset();  // the destructor joins the writer but leaves step-6 incomplete
  EXPECT_FALSE(fs::exists(step_dir(6)));

  auto loader = manager(base_config());
  distributed::ShardedStateDict loaded, loaded_opt;
  nlohmann::json state;
  ASSERT_EQ(load(*loader, loaded, loaded_opt, state)->step, 5);
  expect_equal(model_state(), loaded);  // the values at save(), not the later ones
}

TEST_F(Manager, AsyncSaveCompletesAtTheNextSave) {
  auto c = base_config();
  c.async_mode = "async";
  auto m = manager(c);
  save(*m, 1);
  save(*m, 2, 1.0, /*last=*/true);  // completes step 1 first; the last save is synchronous
  EXPECT_TRUE(fs::exists(step_dir(1) / "metadata.json"));
  EXPECT_TRUE(fs::exists(step_dir(2) / "metadata.json"));
}

TEST_F(Manager, ExcludeFromLoading) {
  auto m = manager(base_config());
  save(*m, 3);
  auto c = base_config();
  c.exclude_from_loading = {"optimizer", "dataloader"};
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state = {{"dataloader", "mine"}};
  load(*manager(c), model, optimizer, state);
  expect_equal(model_state(), model);
  for (const auto& [name, p] : optimizer) EXPECT_EQ(p.local.abs().sum().item<float>(), 0) << name;
  EXPECT_EQ(state["dataloader"], "mine");
  EXPECT_EQ(state["lr_scheduler"]["last_step"], 3);

  c.exclude_from_loading = {"model", "bogus"};
  EXPECT_THROW(manager(c), ConfigError);
}

TEST_F(Manager, LastSaveModelOnlyInExportDtype) {
  auto c = base_config();
  c.export_dtype = "bfloat16";
  auto m = manager(c);
  save(*m, 8, 0.0, /*last=*/true);
  const auto metadata = read_metadata(step_dir(8).string());
  EXPECT_TRUE(metadata.model_only);
  EXPECT_EQ(metadata.sections.count("optimizer"), 0u);
  EXPECT_EQ(metadata.sections.at("model").at("norm.weight").dtype, torch::kBFloat16);

  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state = {{"train_state", "untouched"}};
  auto result = load(*m, model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->model_only);
  EXPECT_EQ(result->step, 8);
  for (const auto& [name, t] : model_state()) {
    EXPECT_TRUE(torch::equal(model.at(name).local, t.to(torch::kBFloat16).to(torch::kFloat32)))
        << name;
  }
  EXPECT_EQ(state["train_state"], "untouched");
}

TEST_F(Manager, InitialLoadPath) {
  auto m = manager(base_config());
  save(*m, 4, 3.0);
  auto c = base_config();
  c.folder = "fresh_run";
  c.initial_load_path = step_dir(4).string();
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state = {{"train_state", "untouched"}};
  auto result = load(*manager(c), model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 0);  // model weights only: training starts at step 1
  EXPECT_TRUE(result->model_only);
  expect_equal(model_state(3.0), model);
  EXPECT_EQ(state["train_state"], "untouched");

  c.initial_load_model_only = false;
  result = load(*manager(c), model, optimizer, state);
  EXPECT_EQ(result->step, 4);
  expect_equal(optimizer_state(3.0), optimizer);
  EXPECT_EQ(state["train_state"]["step"], 4);
}

TEST_F(Manager, RankStateOfAnotherWorldSizeComesFromRankZero) {
  const auto dir = step_dir(6).string() + ".tmp";
  fs::create_directories(dir);
  const auto full = model_state();
  for (int r = 0; r < 2; ++r) {
    const auto pieces = testing::fsdp_pieces(full, r, 2);
    write_rank_part(dir, r, {{"model", &pieces}}, rank_state(6, r));
  }
  finalize_checkpoint(dir, 2, CheckpointHeader{6, kModel});
  fs::rename(dir, step_dir(6));
  auto c = base_config();
  c.exclude_from_loading = {"optimizer"};
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  load(*manager(c), model, optimizer, state);
  expect_equal(full, model);
  EXPECT_EQ(state["train_state"]["rank"], 0);
}

TEST_F(Manager, RefusesATruncatedFile) {
  auto m = manager(base_config());
  save(*m, 1);
  const auto file = step_dir(1) / "rank_0.bin";
  const auto bytes = fs::file_size(file);
  fs::resize_file(file, bytes / 2);
  const std::string error = load_error(*m);
  EXPECT_NE(error.find(fmt::format("rank_0.bin: {} bytes, metadata.json records {}", bytes / 2,
                                   bytes)),
            std::string::npos)
      << error;
}

TEST_F(Manager, RefusesAFlippedByte) {
  auto m = manager(base_config());
  save(*m, 1);
  const auto file = step_dir(1) / "rank_0.bin";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(100);
    f.write(&c, 1);
  }
  const std::string error = load_error(*m);
  EXPECT_NE(error.find("rank_0.bin: SHA-256"), std::string::npos) << error;
  EXPECT_NE(error.find("the file is corrupt"), std::string::npos) << error;
}

TEST_F(Manager, RefusesAWrongShapeAndAMissingTensor) {
  auto m = manager(base_config());
  save(*m, 1);
  distributed::ShardedStateDict model = testing::empty_pieces(model_state(), 0, 1);
  distributed::ShardedStateDict optimizer = testing::empty_pieces(optimizer_state(), 0, 1);
  model["norm.weight"] = distributed::whole(torch::zeros({9}));
  nlohmann::json state;
  try {
    m->load(model, optimizer, state);
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("model tensor 'norm.weight': the checkpoint holds global "
                                         "shape [8], this run expects [9]"),
              std::string::npos)
        << e.what();
  }
  model = testing::empty_pieces(model_state(), 0, 1);
  model["output.weight"] = distributed::whole(torch::zeros({21, 8}));
  try {
    m->load(model, optimizer, state);
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("metadata.json: model tensor 'output.weight' is missing "
                                         "from the checkpoint"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Manager, RefusesAForeignModel) {
  save(*manager(base_config()), 1);
  const std::string error = load_error(*manager(base_config(), {"qwen3", "debugmodel"}));
  EXPECT_NE(error.find("metadata.json: a checkpoint of llama3 'debugmodel', but this run trains "
                       "qwen3 'debugmodel'"),
            std::string::npos)
      << error;
  EXPECT_NE(load_error(*manager(base_config(), {"llama3", "8B"})).find("another model or flavor"),
            std::string::npos);
}

TEST_F(Manager, RefusesMissingOrCorruptMetadata) {
  auto m = manager(base_config());
  save(*m, 2);  // the only one: nothing to fall back to
  fs::remove(step_dir(2) / "metadata.json");
  std::string error = load_error(*m);
  EXPECT_NE(error.find("step-2/metadata.json: missing: the checkpoint is incomplete or not a "
                       "titan checkpoint"),
            std::string::npos)
      << error;
  std::ofstream(step_dir(2) / "metadata.json") << "{\"format\": \"titan-checkpoint\", ";
  error = load_error(*m);
  EXPECT_NE(error.find("step-2/metadata.json: not valid JSON"), std::string::npos) << error;
  std::ofstream(step_dir(2) / "metadata.json") << "{\"format\": \"other\"}";
  error = load_error(*m);
  EXPECT_NE(error.find("step-2/metadata.json: not a titan checkpoint"), std::string::npos) << error;
}

// A newest checkpoint that fails to load is left in place and the one before it loads; with
// checkpoint.load_step naming it, its error stands.
TEST_F(Manager, ADamagedNewestCheckpointFallsBackToThePreviousOne) {
  auto m = manager(base_config());
  save(*m, 1);
  save(*m, 2, /*shift=*/1.0);
  const auto data = step_dir(2) / "rank_0.bin";
  fs::resize_file(data, fs::file_size(data) - 1);
  distributed::ShardedStateDict model, optimizer;
  nlohmann::json state;
  auto result = load(*m, model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 1);
  expect_equal(model_state(), model);
  EXPECT_EQ(state, rank_state(1));
  EXPECT_TRUE(fs::exists(data));
  auto c = base_config();
  c.load_step = 2;
  EXPECT_NE(load_error(*manager(c)).find("rank_0.bin"), std::string::npos);
}

// --- Several processes: this binary re-executed as the ranks of a real Gloo world. ---

// The command line of rank `rank` of `world` running this binary's DISABLED_Rank test.
std::string rank_command(int rank, int world, int port, const std::string& mode,
                         const fs::path& dump) {
  return fmt::format(
      "RANK={} WORLD_SIZE={} MASTER_ADDR=127.0.0.1 MASTER_PORT={} CKPT_MODE={} CKPT_DUMP={} "
      "'{}' --gtest_also_run_disabled_tests --gtest_filter=MultiProcess.DISABLED_Rank",
      rank, world, port, mode, dump.string(), fs::read_symlink("/proc/self/exe").string());
}

// Runs `world` ranks with `mode`; returns their exit status.
testing::CommandResult run_ranks(int world, const std::string& mode, const fs::path& dump) {
  const int port = testing::free_port();
  std::string script = "pids=''; ";
  for (int r = 0; r < world; ++r) {
    script += fmt::format("{} > {}/rank{}.log 2>&1 & pids=\"$pids $!\"; ",
                          rank_command(r, world, port, mode, dump), dump.string(), r);
  }
  // A rank passes when its one test ran and passed (a filter matching nothing also exits 0).
  script += fmt::format("rc=0; for p in $pids; do wait $p || rc=1; done; "
                        "for f in {0}/rank*.log; do grep -q 'PASSED  ] 1 test' $f || rc=1; done; "
                        "[ $rc = 0 ] || cat {0}/rank*.log; exit $rc",
                        dump.string());
  return testing::run_command(script);
}

// One rank: "save" saves FSDP pieces at step 5 (async) and the state + 1 at step 10 (last, so
// synchronous and model only = false); "load" loads step 5 into its own FSDP layout and checks;
// "kill" completes step 1, starts an async save of step 2 and SIGKILLs itself.
TEST(MultiProcess, DISABLED_Rank) {
  const std::string mode = std::getenv("CKPT_MODE");
  const auto info = distributed::WorldInfo::from_env();
  auto world = distributed::World::join(info, {std::chrono::seconds(60), std::chrono::seconds(60)});
  auto c = base_config();
  c.async_mode = "async";
  c.last_save_model_only = false;
  CheckpointManager m(c, std::getenv("CKPT_DUMP"), world->global(), kModel);
  const int r = info.rank;
  const int n = info.world_size;
  if (mode == "kill") {
    const auto model = testing::fsdp_pieces(model_state(), r, n);
    const auto optimizer = testing::fsdp_pieces(optimizer_state(), r, n);
    m.save(1, model, optimizer, rank_state(1, r), "config", /*last=*/false);
    m.wait();
    m.save(2, model, optimizer, rank_state(2, r), "config", /*last=*/false);
    ::kill(::getpid(), SIGKILL);
  }
  if (mode == "save") {
    auto model = testing::fsdp_pieces(model_state(), r, n);
    auto optimizer = testing::fsdp_pieces(optimizer_state(), r, n, {"exp_avg_sq.norm.weight"});
    m.save(5, model, optimizer, rank_state(5, r), "config", /*last=*/false);
    for (auto& [name, p] : model) p.local.add_(1.0);
    m.save(10, model, optimizer, rank_state(10, r), "config", /*last=*/true);
    return;
  }
  c.load_step = 5;
  CheckpointManager loader(c, std::getenv("CKPT_DUMP"), world->global(), kModel);
  auto model = testing::empty_pieces(model_state(), r, n);
  auto optimizer = testing::empty_pieces(optimizer_state(), r, n);
  nlohmann::json state;
  auto result = loader.load(model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 5);
  for (const auto& [name, p] : testing::fsdp_pieces(model_state(), r, n)) {
    EXPECT_TRUE(torch::equal(model.at(name).local, p.local)) << name;
  }
  for (const auto& [name, p] : testing::fsdp_pieces(optimizer_state(), r, n)) {
    EXPECT_TRUE(torch::equal(optimizer.at(name).local, p.local)) << name;
  }
  EXPECT_EQ(state["train_state"]["rank"], 0);  // another world size: rank 0's state
}

TEST(MultiProcess, SaveWithTwoRanksLoadWithThreeAndOne) {
  const auto dump = testing::make_temp_dir("checkpoint_multiprocess");
  auto saved = run_ranks(2, "save", dump);
  ASSERT_EQ(saved.exit_code, 0) << saved.output;
  const auto metadata = read_metadata((dump / "checkpoint" / "step-5").string());
  EXPECT_EQ(metadata.world_size, 2);
  EXPECT_EQ(metadata.rank_states.at(1)["train_state"]["rank"], 1);
  // The replicated optimizer tensor is written by rank 0 only.
  EXPECT_EQ(metadata.sections.at("optimizer").at("exp_avg_sq.norm.weight").chunks.size(), 1u);

  auto loaded = run_ranks(3, "load", dump);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;

  auto c = base_config();
  CheckpointManager one(c, dump.string(), testing::group_of_one(), kModel);
  auto model = testing::empty_pieces(model_state(), 0, 1);
  auto optimizer = testing::empty_pieces(optimizer_state(), 0, 1);
  nlohmann::json state;
  auto result = one.load(model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 10);
  expect_equal(model_state(1.0), model);
  expect_equal(optimizer_state(), optimizer);
  EXPECT_EQ(state["train_state"]["step"], 10);
  fs::remove_all(dump);
}

TEST(MultiProcess, SigkillMidSaveKeepsThePreviousCheckpoint) {
  const auto dump = testing::make_temp_dir("checkpoint_sigkill");
  const auto r = testing::run_command(rank_command(0, 1, testing::free_port(), "kill", dump));
  ASSERT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_TRUE(fs::exists(dump / "checkpoint" / "step-2.tmp"));
  EXPECT_FALSE(fs::exists(dump / "checkpoint" / "step-2"));
  CheckpointManager m(base_config(), dump.string(), testing::group_of_one(), kModel);
  auto model = testing::empty_pieces(model_state(), 0, 1);
  auto optimizer = testing::empty_pieces(optimizer_state(), 0, 1);
  nlohmann::json state;
  auto result = m.load(model, optimizer, state);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->step, 1);
  expect_equal(model_state(), model);
  fs::remove_all(dump);
}

}  // namespace unit_components_checkpoint_checkpoint_manager_test
}  // namespace titan::components::checkpoint
