// metrics.enable_tensorboard: the metrics rank writes <dump>/tb/<YYYYmmdd-HHMM>/events.out.
// tfevents.*, and TensorBoard's own reader (Python `tensorboard`'s event accumulator, which
// checks every record's CRC-32C) recovers every tag of a 20-step FSDP 2 run at every step, each
// value equal to the float32 of what metrics.jsonl holds: TorchTitan's tags, the ones users'
// dashboards name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "support/skip.h"
#include "support/training.h"

namespace titan {
namespace integration_tensorboard_test {

using Scalars = std::map<std::string, std::vector<std::pair<int64_t, float>>>;

Scalars read_scalars(const std::filesystem::path& run) {
  const std::string python = TITAN_PYTHON;
  const std::string script =
      std::string(TITAN_SOURCE_DIR) + "/tests/support/tensorboard_scalars.py";
  auto r = testing::run_command(python + " " + script + " " + run.string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  Scalars out;
  if (r.exit_code != 0) return out;
  const auto json = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  for (const auto& [tag, events] : json.items()) {
    for (const auto& e : events) out[tag].emplace_back(e[0].get<int64_t>(), e[1].get<float>());
  }
  return out;
}

// The value the tag holds at a record, from metrics.jsonl (and the manifest's device memory).
double expected(const std::string& tag, const nlohmann::json& r, double capacity_gib) {
  static const std::map<std::string, std::string> keys = {
      {"loss_metrics/global_avg_loss", "loss"},
      {"loss_metrics/global_max_loss", "max_loss"},
      {"grad_norm", "grad_norm"},
      {"lr", "lr"},
      {"throughput(tps)", "tps"},
      {"tflops", "tflops"},
      {"mfu(%)", "mfu"},
      {"time_metrics/end_to_end(s)", "step_time_s"},
      {"time_metrics/data_loading(s)", "data_time_s"},
      {"memory/max_active(GiB)", "max_active_gib"},
      {"memory/max_reserved(GiB)", "max_reserved_gib"},
      {"memory/num_alloc_retries", "num_alloc_retries"},
      {"memory/num_ooms", "num_ooms"},
      {"memory/num_system_allocs", "num_system_allocs"},
      {"n_tokens_seen", "tokens_seen"},
  };
  if (auto k = keys.find(tag); k != keys.end()) return r[k->second].get<double>();
  if (tag == "time_metrics/data_loading(%)") {
    return 100.0 * r["data_time_s"].get<double>() / r["step_time_s"].get<double>();
  }
  if (tag == "memory/max_active(%)") {
    return 100.0 * r["max_active_gib"].get<double>() / capacity_gib;
  }
  if (tag == "memory/max_reserved(%)") {
    return 100.0 * r["max_reserved_gib"].get<double>() / capacity_gib;
  }
  ADD_FAILURE() << "unexpected tag " << tag;
  return 0;
}

TEST(TensorBoard, ItsReaderRecoversEveryTagAndValue) {
  if (testing::run_command(std::string(TITAN_PYTHON) + " -c 'import tensorboard'").exit_code) {
    TITAN_SKIP_OR_FAIL("TITAN_PYTHON cannot import tensorboard (scripts/setup.sh installs it)");
  }
  constexpr int kSteps = 20;
  auto run = testing::train_steps(
      2,
      "--module llama3 --config llama3_debugmodel --training.seq_len 32 "
      "--training.local_batch_size 2 --metrics.enable_tensorboard",
      kSteps);
  EXPECT_NE(run.command.output.find("TensorBoard logging enabled. Logs will be saved at " +
                                    (run.dump / "tb").string() + "/"),
            std::string::npos)
      << run.command.output;
  std::vector<std::filesystem::path> folders;
  for (const auto& e : std::filesystem::directory_iterator(run.dump / "tb")) {
    folders.push_back(e.path());
  }
  ASSERT_EQ(folders.size(), 1u) << "one run folder under tb/";
  EXPECT_EQ(folders[0].filename().string().size(), 13u) << folders[0];  // YYYYmmdd-HHMM
  int event_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(folders[0])) {
    event_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  EXPECT_EQ(event_files, 1) << "the metrics rank's event file only";

  std::ifstream manifest_file(run.dump / "run_manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_file);
  const double capacity_gib = manifest["device"]["memory_bytes"].get<double>() / (1 << 30);
  const Scalars scalars = read_scalars(folders[0]);
  EXPECT_EQ(scalars.size(), 18u) << "TorchTitan's 16 tags, mfu(%) and memory/num_system_allocs";
  for (const auto& [tag, events] : scalars) {
    ASSERT_EQ(events.size(), static_cast<size_t>(kSteps)) << tag;
    for (size_t s = 0; s < events.size(); ++s) {
      const auto& record = run.records[s];
      EXPECT_EQ(events[s].first, record["step"].get<int64_t>()) << tag;
      EXPECT_EQ(events[s].second, static_cast<float>(expected(tag, record, capacity_gib)))
          << tag << " at step " << s + 1;
    }
  }
  // Two ranks: the larger of their mean losses is at least the mean of both.
  for (const auto& record : run.records) {
    EXPECT_GE(record["max_loss"].get<double>(), record["loss"].get<double>());
  }
}

}  // namespace integration_tensorboard_test
}  // namespace titan
