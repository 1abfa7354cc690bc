// Memory snapshots (profiling.enable_memory_snapshot) of FSDP 2 training (llama3 debug model, 6
// blocks, seq 64). Step 2 of 2 is recorded on each rank, and its figures are checked against
// the trainer's own accounting:
// - the peak equals metrics.jsonl's max_active for the step;
// - parameters, gradients and optimizer state equal the "Per-rank training state" line;
// - when activations peak every block holds them, alike in size; at the peak the blocks still
//   to run backward, and only they, hold them.
// Recording changes no loss. A rank held to less memory than step 1 needs (the
// TITAN_TEST_MEMORY_LIMIT_BYTES hook; one rank, so that no peer fails first) fails in step 1
// and writes what it held, and the recorded step up to the failure, to iteration_1_exit.
#include <gtest/gtest.h>

#include <fstream>

#include "support/training.h"

namespace titan {
namespace integration_memory_snapshot_test {

const std::string kArgs =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.local_batch_size 4 --profiling.profile_freq 2 ";
constexpr double kMiB = 1 << 20;

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
}

int64_t category(const nlohmann::json& state, const char* name) {
  return state["by_category"][name].get<int64_t>();
}

TEST(MemorySnapshot, StepPeakAndCategoriesMatchTheTrainersAccounting) {
  auto plain = testing::train_steps(2, kArgs, 2);
  auto run = testing::train_steps(2, kArgs + "--profiling.enable_memory_snapshot", 2);
  EXPECT_EQ(run.losses(), plain.losses());  // the markers change nothing
  EXPECT_EQ(run.grad_norms(), plain.grad_norms());
  const auto folder = run.dump / "memory_snapshot";
  EXPECT_FALSE(std::filesystem::exists(folder / "iteration_1"));
  const testing::StateMiB state = testing::state_mib(run);
  for (int rank = 0; rank < 2; ++rank) {
    const auto name = "rank" + std::to_string(rank);
    const auto doc = read_json(folder / "iteration_2" / (name + "_memory_snapshot.json"));
    ASSERT_TRUE(doc.contains("peak")) << doc.dump(2);
    const auto& peak = doc["peak"];
    EXPECT_GT(doc["events"].get<int64_t>(), 100);
    if (rank == 0) {  // metrics.jsonl is rank 0's
      EXPECT_NEAR(peak["bytes"].get<double>() / double(1 << 30),
                  run.records[1]["max_active_gib"].get<double>(), 1e-9);
      EXPECT_NEAR(category(doc["start"], "parameters") / kMiB, state.params, 0.01);
      EXPECT_NEAR(category(doc["start"], "optimizer_state") / kMiB, state.optimizer, 0.01);
      EXPECT_NEAR(category(doc["start"], "gradients") / kMiB, state.grads, 0.01);  // step 1's
      EXPECT_NEAR(category(doc["end"], "gradients") / kMiB, state.grads, 0.01);
    }
    EXPECT_GT(category(peak, "communication"), 0) << name;
    // When activations peak, in layers.5's forward, every block holds its activations, alike
    // in size (the same shapes; layers.5 also a temporary of its forward). The peak comes
    // later, in backward or after it (seen: from layers.4's backward to after layers.0's, as
    // the gradients' reduce-scatters keep up or lag): there only the blocks still to run
    // backward, layers.0 up to some k, hold activations, each as much as before (the one in
    // backward has begun freeing).
    const auto& forward = doc["activations_peak"]["activations_by_block"];
    ASSERT_TRUE(forward.contains("layers.0")) << name << "\n" << doc.dump(2);
    const int64_t block_bytes = forward["layers.0"].get<int64_t>();
    EXPECT_GT(block_bytes, 0);
    for (int layer = 0; layer < 5; ++layer) {
      EXPECT_EQ(forward.value("layers." + std::to_string(layer), int64_t{0}), block_bytes)
          << name << " " << layer;
    }
    EXPECT_GE(forward.value("layers.5", int64_t{0}), block_bytes) << name;
    const auto& blocks = peak["activations_by_block"];
    int held = 0;
    while (blocks.contains("layers." + std::to_string(held))) ++held;
    for (int layer = held; layer < 6; ++layer) {
      EXPECT_FALSE(blocks.contains("layers." + std::to_string(layer))) << name << " " << layer;
    }
    for (int layer = 0; layer < held; ++layer) {
      const int64_t bytes = blocks["layers." + std::to_string(layer)].get<int64_t>();
      if (layer + 1 < held) {
        EXPECT_EQ(bytes, block_bytes) << name << " " << layer;
      }
      EXPECT_LE(bytes, block_bytes) << name << " " << layer;
    }
    std::ifstream svg(folder / "iteration_2" / (name + "_memory_timeline.svg"));
    const std::string text((std::istreambuf_iterator<char>(svg)), {});
    EXPECT_EQ(text.rfind("<svg", 0), 0u) << name;
    EXPECT_NE(text.find("peak "), std::string::npos) << name;
  }
}

TEST(MemorySnapshot, ARankOutOfMemoryWritesWhatItHeld) {
  auto reference = testing::train_steps(1, kArgs + "--profiling.enable_memory_snapshot", 2);
  const auto start = read_json(reference.dump / "memory_snapshot" / "iteration_2" /
                               "rank0_memory_snapshot.json")["start"];
  // Step 2's start holds the optimizer state step 1 creates: step 1 cannot fit under it.
  const int64_t limit = start["bytes"].get<int64_t>() - 1;
  auto run = testing::train(
      "OMP_NUM_THREADS=1 NGPU=1 TITAN_TEST_MEMORY_LIMIT_BYTES=" + std::to_string(limit),
      kArgs +
          "--profiling.enable_memory_snapshot --profiling.profile_freq 1 "
          "--training.steps 2");
  EXPECT_NE(run.command.exit_code, 0);
  EXPECT_NE(run.command.output.find("Out of memory in step 1"), std::string::npos)
      << run.command.output;
  const auto doc =
      read_json(run.dump / "memory_snapshot" / "iteration_1_exit" / "rank0_memory_snapshot.json");
  ASSERT_TRUE(doc.contains("requested_bytes")) << doc.dump(2) << run.command.output;
  int64_t alive = 0;
  for (const auto& [name, bytes] : doc["live_when_failed"].items()) alive += bytes.get<int64_t>();
  EXPECT_GT(alive + doc["requested_bytes"].get<int64_t>(), limit) << doc.dump(2);
  EXPECT_GT(doc["live_when_failed"]["parameters"].get<int64_t>(), 0);
  EXPECT_NE(doc["error"].get<std::string>().find("TITAN_TEST_MEMORY_LIMIT_BYTES"),
            std::string::npos);
  // Step 1 was being recorded (profile_freq 1): its timeline up to the failure comes too.
  ASSERT_TRUE(doc.contains("peak")) << doc.dump(2);
  EXPECT_GE(doc["peak"]["bytes"].get<int64_t>(), doc["start"]["bytes"].get<int64_t>());
  EXPECT_TRUE(std::filesystem::exists(run.dump / "memory_snapshot" / "iteration_1_exit" /
                                      "rank0_memory_timeline.svg"));
}

}  // namespace integration_memory_snapshot_test
}  // namespace titan
