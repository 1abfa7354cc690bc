// Test helper: a short training run through `titan launch`, on tinyshakespeare, with every
// step logged; returns the command's output and the metrics.jsonl records.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "support/process.h"

namespace titan::testing {

struct TrainRun {
  CommandResult command;
  std::vector<nlohmann::json> records;  // metrics.jsonl, one per step
  std::filesystem::path dump;

  std::vector<double> losses() const { return series("loss"); }
  std::vector<double> grad_norms() const { return series("grad_norm"); }
  std::vector<double> series(const char* key) const {
    std::vector<double> out;
    for (const auto& r : records) out.push_back(r[key].get<double>());
    return out;
  }
};

/// MiB of parameters, gradients and optimizer state rank 0 holds ("Per-rank training state").
struct StateMiB {
  double params = 0, grads = 0, optimizer = 0;
};

inline StateMiB state_mib(const TrainRun& r) {
  static const std::regex line(
      "parameters ([0-9.]+) MiB, gradients ([0-9.]+) MiB, optimizer ([0-9.]+) MiB");
  std::smatch m;
  StateMiB out;
  EXPECT_TRUE(std::regex_search(r.command.output, m, line)) << r.command.output;
  if (m.size() == 4) out = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3])};
  return out;
}

/// Layouts must be shown to shard: rank 0 of `other` holds `fraction` of the parameter,
/// gradient and optimizer bytes rank 0 of `ref` holds, within 2% (FSDP's padding rows and
/// tensor parallelism's replicated norms add a little). A run where every rank kept the whole
/// model would pass every parity check but this one.
inline void expect_state_fraction(const TrainRun& ref, const TrainRun& other, double fraction,
                                  const std::string& what) {
  const StateMiB a = state_mib(ref), b = state_mib(other);
  for (auto [name, x, y] :
       {std::tuple<const char*, double, double>{"parameters", a.params, b.params},
        {"gradients", a.grads, b.grads},
        {"optimizer", a.optimizer, b.optimizer}}) {
    EXPECT_GE(y, 0.99 * fraction * x) << what << ": " << name << " MiB per rank";
    EXPECT_LE(y, 1.02 * fraction * x) << what << ": " << name << " MiB per rank";
  }
}

/// The layout parity check: `other` logged the steps `ref` did, and every step's loss and
/// gradient norm lie within `rtol` (relative; 0: bit-equal) of `ref`'s. The gradient norm is
/// compared because AdamW is invariant to a constant gradient scale: a gradient averaged where
/// it should be summed leaves the losses unchanged (as `titan compare` checks both). The
/// gradient norms within `grad_norm_rtol` when given.
inline void expect_same_curves(const TrainRun& ref, const TrainRun& other, double rtol,
                               const std::string& what,
                               std::optional<double> grad_norm_rtol = std::nullopt) {
  for (const char* key : {"loss", "grad_norm"}) {
    if (std::string(key) == "grad_norm" && grad_norm_rtol) rtol = *grad_norm_rtol;
    auto a = ref.series(key), b = other.series(key);
    ASSERT_EQ(a.size(), b.size()) << what << ": steps logged\n" << other.command.output;
    for (size_t s = 0; s < a.size(); ++s) {
      if (rtol == 0) {
        EXPECT_EQ(b[s], a[s]) << what << ": " << key << " at step " << s + 1;
      } else {
        EXPECT_NEAR(b[s], a[s], rtol * std::abs(a[s]))
            << what << ": " << key << " at step " << s + 1;
      }
    }
  }
}

/// `titan compare REF OTHER --rtol 1e-4` passes: the check a user runs to validate a layout.
inline void expect_compare_passes(const TrainRun& ref, const TrainRun& other,
                                  const std::string& what) {
  auto compare = run_command(titan_binary() + " compare " + ref.dump.string() + " " +
                             other.dump.string() + " --rtol 1e-4");
  EXPECT_EQ(compare.exit_code, 0) << what << "\n" << compare.output;
}

inline std::string shakespeare() {
  return std::string(TITAN_SHARED_DATA) + "/corpora/tinyshakespeare.txt";
}

/// Runs `env titan launch args` with the tinyshakespeare dataset and log_freq 1, dumping into
/// `dump` (a new folder by default).
inline TrainRun train(const std::string& env, const std::string& args,
                      std::filesystem::path dump = make_temp_dir("titan_train")) {
  TrainRun r;
  r.dump = std::move(dump);
  r.command =
      run_command(env + " " + titan_binary() + " launch " + args + " --training.dataset_path " +
                  shakespeare() + " --metrics.log_freq 1 --job.dump_folder " + r.dump.string());
  std::ifstream in(r.dump / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) r.records.push_back(nlohmann::json::parse(line));
  return r;
}

/// train() on `ngpu` ranks of one thread each for `steps` steps, expected to succeed and to log
/// every step.
inline TrainRun train_steps(int ngpu, const std::string& args, int steps) {
  auto r = train("OMP_NUM_THREADS=1 NGPU=" + std::to_string(ngpu),
                 args + " --training.steps " + std::to_string(steps));
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  EXPECT_EQ(r.records.size(), static_cast<size_t>(steps)) << r.command.output;
  return r;
}

/// A run stopped and resumed in one dump folder: `first_args` on `first_ngpu` ranks for
/// `first_steps` steps, then `args` on `ngpu` ranks up to step `steps`, which must resume from
/// the first run's checkpoint. Its records are both runs' steps.
inline TrainRun train_resumed(int first_ngpu, const std::string& first_args, int ngpu,
                              const std::string& args, int first_steps, int steps) {
  const auto env = [](int n) { return "OMP_NUM_THREADS=1 NGPU=" + std::to_string(n); };
  auto first =
      train(env(first_ngpu), first_args + " --training.steps " + std::to_string(first_steps));
  EXPECT_EQ(first.command.exit_code, 0) << first.command.output;
  auto r = train(env(ngpu), args + " --training.steps " + std::to_string(steps), first.dump);
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  EXPECT_NE(r.command.output.find("Resumed from"), std::string::npos) << r.command.output;
  return r;
}

}  // namespace titan::testing
