// `titan validate`: the first best practice as a command. Runs the chosen config (run_train.sh's
// MODULE / CONFIG / overrides, on NGPU ranks) shortened to a few steps in eager mode, twice:
// a first run saving checkpoints halfway and at the end, and a second run resumed from the
// halfway checkpoint. Then it checks that every rank stepped, the loss is finite and falls, the
// checkpoints were written, and the resumed steps reproduce the first run's losses and
// gradient norms bit for bit; prints a pass/fail table and exits 0 when all pass (writing
// <job.dump_folder>/validated_baseline.json, which titan launch looks for), 1 otherwise.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "titan/cli/commands.h"
#include "titan/cli/flags.h"
#include "titan/cli/validated_baseline.h"
#include "titan/config/resolve.h"
#include "titan/distributed/launcher.h"
#include "titan/errors.h"
#include "titan/platform/clock.h"

namespace titan::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kValidateUsage =
    "Usage: [ENV...] titan validate [--steps N] [--module M] [--config C] [--section.key "
    "value]...\n"
    "       [ENV...] ./run_train.sh --validate [--steps N] [--section.key value]...\n"
    "Runs the config for N steps (default 6, even, at least 4) in eager mode on NGPU ranks with a\n"
    "checkpoint at N/2 and N, resumes a second run from N/2, and checks: every rank steps, the\n"
    "loss is finite and falls, the checkpoints are written, the resumed steps are bit-equal.\n"
    "Runs go under <job.dump_folder>/validate-<time>/. Exit code 0: all pass; 1: a check failed.\n";

struct Check {
  std::string name;
  bool pass = false;
  std::string detail;
};

std::vector<nlohmann::json> read_records(const fs::path& dump) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dump / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

double number(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : std::nan(""); }

const FlagSpec& validate_flags() {
  static const FlagSpec spec{"validate", {"steps"}, {}, 0, kValidateUsage,
                             /*config_overrides=*/true};
  return spec;
}

// The overrides every validation run gets on top of the user's.
std::vector<std::string> shortened(int steps, const fs::path& dump) {
  return {"--training.steps",
          std::to_string(steps),
          "--compile.no_enable",
          "--metrics.log_freq",
          "1",
          "--profiling.no_enable_profiling",
          "--checkpoint.enable",
          "--checkpoint.interval",
          std::to_string(steps / 2),
          "--checkpoint.keep_latest_k",
          "0",
          "--checkpoint.no_last_save_model_only",
          "--checkpoint.async_mode",
          "disabled",
          "--job.dump_folder",
          dump.string()};
}

Check every_rank_steps(const fs::path& dump, int world, int steps, int exit_code) {
  int stepped = 0;
  for (int r = 0; r < world; ++r) {
    std::ifstream in(dump / "logs" / fmt::format("rank_{}.log", r));
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.find(fmt::format("step: {}/{}  loss:", steps, steps)) != std::string::npos) ++stepped;
  }
  return {"every rank steps", stepped == world && exit_code == 0,
          fmt::format("{} of {} ranks logged step {}; the run exited with code {}", stepped, world,
                      steps, exit_code)};
}

Check loss_finite(const std::vector<nlohmann::json>& records, int steps) {
  for (const auto& r : records) {
    if (!std::isfinite(number(r["loss"])) || !std::isfinite(number(r["grad_norm"]))) {
      return {"loss finite", false,
              fmt::format("step {}: loss {}, grad_norm {}", r["step"].get<int>(), number(r["loss"]),
                          number(r["grad_norm"]))};
    }
  }
  const bool all = static_cast<int>(records.size()) == steps;
  return {"loss finite", all,
          fmt::format("{} of {} steps logged{}, every loss and gradient norm logged finite",
                      records.size(), steps, all ? "" : " (the run stopped: see its log)")};
}

Check loss_falls(const std::vector<nlohmann::json>& records) {
  if (records.size() < 2) return {"loss falls", false, "fewer than 2 steps logged"};
  const double first = number(records.front()["loss"]), last = number(records.back()["loss"]);
  return {"loss falls", last < first,
          fmt::format("{:.4f} at step 1, {:.4f} at step {}", first, last,
                      records.back()["step"].get<int>())};
}

Check checkpoints_written(const fs::path& folder, int steps) {
  std::vector<std::string> missing;
  for (int step : {steps / 2, steps}) {
    if (!fs::exists(folder / fmt::format("step-{}", step) / "metadata.json")) {
      missing.push_back(fmt::format("step-{}", step));
    }
  }
  return {"checkpoints written", missing.empty(),
          missing.empty() ? fmt::format("step-{} and step-{}", steps / 2, steps)
                          : fmt::format("missing: {}", fmt::join(missing, ", "))};
}

Check resume_bit_equal(const std::vector<nlohmann::json>& first,
                       const std::vector<nlohmann::json>& resumed, int steps, int exit_code) {
  const std::string name = "reload is bit-equal";
  const int half = steps / 2;
  if (exit_code < 0) return {name, false, fmt::format("not run: no step-{} to resume", half)};
  if (exit_code != 0 || static_cast<int>(resumed.size()) != steps - half ||
      static_cast<int>(first.size()) != steps) {
    return {name, false,
            fmt::format("the resumed run exited with code {} after {} of {} steps", exit_code,
                        resumed.size(), steps - half)};
  }
  for (int i = 0; i < steps - half; ++i) {
    const auto& a = first[half + i];
    const auto& b = resumed[i];
    if (a["loss"] != b["loss"] || a["grad_norm"] != b["grad_norm"]) {
      return {name, false,
              fmt::format("step {}: loss {} resumed against {}", half + 1 + i, number(b["loss"]),
                          number(a["loss"]))};
    }
  }
  return {name, true,
          fmt::format("steps {}-{} from step-{}: the same losses and gradient norms", half + 1,
                      steps, half)};
}

// <dump_folder>/validate-<YYYYmmdd-HHMMSS>.
fs::path validation_folder(const config::JobConfig& job) {
  return fs::path(job.job.dump_folder) /
         ("validate-" + platform::local_time_stamp("%Y%m%d-%H%M%S"));
}

}  // namespace

int validate_command(const Args& all_args) {
  const auto flags = Flags::parse(validate_flags(), all_args);
  const int steps = static_cast<int>(flags.get_int("steps", 6));
  if (steps < 4 || steps % 2 != 0) flags.fail("--steps must be even and at least 4");
  const Args& args = flags.overrides();
  auto cli = config::parse_command_line(args);
  const auto job = config::resolve(cli);
  const int world = distributed::LaunchOptions::from_env().world_size();
  const fs::path root = validation_folder(job);
  const fs::path first = root / "run", resumed = root / "resumed";
  auto with = [&](std::vector<std::string> extra) {
    Args out = args;
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  };
  std::cerr << fmt::format("titan validate: {} steps of config {} ({}; run eager) on {} ranks, in "
                           "{}\n",
                           steps, config::base_config_name(cli), config::describe_compute(job),
                           world, root.string());
  const int first_code = launch_command(with(shortened(steps, first)));
  const fs::path halfway = first / job.checkpoint.folder / fmt::format("step-{}", steps / 2);
  int resumed_code = -1;  // not run: nothing to resume from
  if (fs::exists(halfway)) {
    auto resume_args = shortened(steps, resumed);
    resume_args.insert(resume_args.end(), {"--checkpoint.initial_load_path", halfway.string(),
                                           "--checkpoint.no_initial_load_model_only",
                                           "--checkpoint.no_initial_load_in_hf"});
    resumed_code = launch_command(with(resume_args));
  }
  const auto records = read_records(first);
  const std::vector<Check> checks = {
      every_rank_steps(first, world, steps, first_code),
      loss_finite(records, steps),
      loss_falls(records),
      checkpoints_written(first / job.checkpoint.folder, steps),
      resume_bit_equal(records, read_records(resumed), steps, resumed_code),
  };
  std::cout << "\n| check | result | detail |\n|---|---|---|\n";
  bool all = true;
  for (const auto& c : checks) {
    std::cout << fmt::format("| {} | {} | {} |\n", c.name, c.pass ? "pass" : "FAIL", c.detail);
    all = all && c.pass;
  }
  std::cout << (all ? "titan validate: every check passed\n"
                    : "titan validate: a check failed (the runs' logs are under " + root.string() +
                          ")\n");
  if (all) {
    record_validated_baseline({job.model.name, job.model.flavor, world, steps, root.string()},
                              job.job.dump_folder);
  }
  return all ? 0 : 1;
}

}  // namespace titan::cli
