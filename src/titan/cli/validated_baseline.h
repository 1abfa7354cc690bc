// The validated eager baselines that `titan validate` leaves and `titan launch` looks for before
// a tuning run (the first practice of TorchTitan Neuron's best practices): a passing validation is
// written into its job.dump_folder and recorded in the user's cache folder, so a tuning run in any
// dump folder finds it.
#pragma once

#include <filesystem>
#include <string>

namespace titan::cli {

/// What a passing `titan validate` leaves in job.dump_folder.
inline constexpr const char* kValidatedBaselineFile = "validated_baseline.json";

struct ValidatedBaseline {
  std::string model;
  std::string flavor;
  int world_size = 0;
  int steps = 0;
  std::string runs;  // the folder holding the validation's runs
};

/// Writes `baseline` to <dump_folder>/validated_baseline.json and appends it to
/// <titan_cache_dir()>/validated_baselines.jsonl.
void record_validated_baseline(const ValidatedBaseline& baseline, const std::string& dump_folder);

/// The folder of a validation of `model` `flavor` recorded in `dump_folder` or in the user's
/// cache folder; empty when there is none.
std::string find_validated_baseline(const std::string& model, const std::string& flavor,
                                    const std::string& dump_folder);

}  // namespace titan::cli
