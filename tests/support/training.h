// Test helper: a short training run through `titan launch`, on tinyshakespeare, with every
// step logged; returns the command's output and the metrics.jsonl records.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"

namespace titan::testing {

struct TrainRun {
  CommandResult command;
  std::vector<nlohmann::json> records;  // metrics.jsonl, one per step
  std::filesystem::path dump;

  std::vector<double> losses() const {
    std::vector<double> out;
    for (const auto& r : records) out.push_back(r["loss"].get<double>());
    return out;
  }
};

inline std::string shakespeare() {
  return std::string(TITAN_SHARED_DATA) + "/corpora/tinyshakespeare.txt";
}

/// Runs `env titan launch args` with the tinyshakespeare dataset and log_freq 1.
inline TrainRun train(const std::string& env, const std::string& args) {
  TrainRun r;
  r.dump = make_temp_dir("titan_train");
  r.command = run_command(env + " " + titan_binary() + " launch " + args +
                          " --training.dataset_path " + shakespeare() +
                          " --metrics.log_freq 1 --job.dump_folder " + r.dump.string());
  std::ifstream in(r.dump / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) r.records.push_back(nlohmann::json::parse(line));
  return r;
}

}  // namespace titan::testing
