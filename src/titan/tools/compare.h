// Step-by-step loss comparison of two training runs: the validation workflow that trusts a new
// parallel layout by matching its loss curve against the 1D FSDP baseline trained at the same
// tokens per step on the same data. `titan compare` (cli/compare_command.cpp) wraps it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace titan::tools {

/// One record of metrics.jsonl: the optimizer step and its loss (mean cross-entropy, nats).
struct LossPoint {
  int64_t step = 0;
  double loss = 0;
};

/// What a comparison needs of one run's dump folder.
struct RunRecord {
  std::filesystem::path folder;
  /// Ascending by step. A step logged twice (a resumed run appends) keeps its last record.
  std::vector<LossPoint> losses;
  nlohmann::json manifest;  // run_manifest.json
};

/// Reads `folder`/metrics.jsonl and `folder`/run_manifest.json.
/// Throws DataError naming the path when the folder or a file is missing or unreadable, naming
/// file and line (1-based) when a line of metrics.jsonl is not a JSON object with an integer
/// "step" and a numeric "loss", and when metrics.jsonl holds no record at all.
RunRecord read_run(const std::filesystem::path& folder);

/// A reason two runs' losses cannot be compared: the manifest field and both runs' values.
struct Incompatibility {
  std::string field;  // "model.name", "data.tokens_per_step", "data.files[].sha256", ...
  std::string value_a;
  std::string value_b;
};

/// Checks what must match for the losses to be comparable: model.name and model.flavor,
/// data.tokens_per_step, data.tokenizer, and the dataset files' SHA-256 hashes (as a set: the
/// same files under other paths match). Empty when comparable. Throws DataError naming the
/// manifest and the field when one of these fields is missing or mistyped.
std::vector<Incompatibility> incompatibilities(const RunRecord& a, const RunRecord& b);

/// |b - a| / |a|, with run A the baseline: 0 when a == b (zeros included), +infinity when a is
/// 0 and b is not, or when either is NaN or infinite (a diverged run never matches).
double relative_difference(double a, double b);

/// One step both runs logged.
struct StepDiff {
  int64_t step = 0;
  double loss_a = 0;
  double loss_b = 0;
  double rel_diff = 0;  // relative_difference(loss_a, loss_b)
};

struct LossComparison {
  double rtol = 0;
  std::vector<StepDiff> steps;          // the steps both runs logged, ascending
  std::optional<int64_t> first_bad_step;  // first step whose rel_diff exceeds rtol
  double max_rel_diff = 0;
  int64_t max_rel_diff_step = 0;
  int64_t only_in_a = 0;  // steps logged by one run only (not compared)
  int64_t only_in_b = 0;

  bool within_tolerance() const { return !first_bad_step.has_value(); }
};

/// Compares the losses of the steps both runs logged against relative tolerance `rtol`.
/// Throws DataError naming both folders when they share no logged step.
LossComparison compare_losses(const RunRecord& a, const RunRecord& b, double rtol);

}  // namespace titan::tools
