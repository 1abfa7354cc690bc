// Step-by-step comparison of two training runs' losses and gradient norms: the validation
// workflow that trusts a new parallel layout by matching its curves against the 1D FSDP baseline
// trained at the same tokens per step on the same data. Both are compared because AdamW is
// invariant to a constant gradient scale: a gradient averaged where it should be summed leaves
// the losses unchanged and shows only in the gradient norm. `titan compare`
// (cli/compare_command.cpp) wraps it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace titan::tools {

/// One record of metrics.jsonl: the optimizer step, its loss (mean cross-entropy, nats) and its
/// gradient norm (before clipping).
struct StepPoint {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
};

/// What a comparison needs of one run's dump folder.
struct RunRecord {
  std::filesystem::path folder;
  /// Ascending by step. A step logged twice (a resumed run appends) keeps its last record.
  std::vector<StepPoint> points;
  nlohmann::json manifest;  // run_manifest.json
};

/// Reads `folder`/metrics.jsonl and `folder`/run_manifest.json.
/// Throws DataError naming the path when the folder or a file is missing or unreadable, naming
/// file and line (1-based) when a line of metrics.jsonl is not a JSON object with an integer
/// "step" and a numeric "loss" and "grad_norm", and when metrics.jsonl holds no record at all.
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

/// The experiment's variables that differ between the runs, of "model" (name and flavor),
/// "batch" (sequences per step), "sequence" (training.seq_len) and "layout" (world.layout),
/// from their manifests (a variable a manifest lacks counts as unchanged). More than one at a
/// time cannot say which moved the curve (an anti-pattern of TorchTitan Neuron's best practices;
/// titan compare warns).
std::vector<std::string> changed_variables(const RunRecord& a, const RunRecord& b);

/// |b - a| / |a|, with run A the baseline: 0 when a == b (zeros included), +infinity when a is
/// 0 and b is not, or when either is NaN or infinite (a diverged run never matches).
double relative_difference(double a, double b);

/// One step both runs logged.
struct StepDiff {
  StepPoint a, b;
  double loss_rel_diff = 0;       // relative_difference(a.loss, b.loss)
  double grad_norm_rel_diff = 0;  // relative_difference(a.grad_norm, b.grad_norm)
};

/// The largest relative difference of one quantity and the step it was seen at.
struct MaxDiff {
  double value = 0;
  int64_t step = 0;
};

struct RunComparison {
  double rtol = 0;       // for the loss
  double grad_rtol = 0;  // for the gradient norm
  std::vector<StepDiff> steps;            // the steps both runs logged, ascending
  std::optional<int64_t> first_bad_step;  // first step past rtol or grad_rtol
  MaxDiff max_loss_diff, max_grad_norm_diff;
  int64_t only_in_a = 0;  // steps logged by one run only (not compared)
  int64_t only_in_b = 0;

  bool within_tolerance() const { return !first_bad_step.has_value(); }
};

/// Compares the losses (against relative tolerance `rtol`) and the gradient norms (against
/// `grad_rtol`) of the steps both runs logged. Throws DataError naming both folders when they
/// share no logged step.
RunComparison compare_runs(const RunRecord& a, const RunRecord& b, double rtol, double grad_rtol);

}  // namespace titan::tools
