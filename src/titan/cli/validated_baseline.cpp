#include "titan/cli/validated_baseline.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "titan/platform/env.h"

namespace titan::cli {
namespace {

namespace fs = std::filesystem;

fs::path registry() { return platform::titan_cache_dir() / "validated_baselines.jsonl"; }

bool same_model(const nlohmann::json& entry, const std::string& model, const std::string& flavor) {
  return entry.is_object() && entry.value("model", "") == model &&
         entry.value("flavor", "") == flavor;
}

}  // namespace

void record_validated_baseline(const ValidatedBaseline& baseline, const std::string& dump_folder) {
  const nlohmann::json entry = {{"model", baseline.model},
                                {"flavor", baseline.flavor},
                                {"world_size", baseline.world_size},
                                {"steps", baseline.steps},
                                {"runs", baseline.runs}};
  std::ofstream(fs::path(dump_folder) / kValidatedBaselineFile) << entry.dump(2) << "\n";
  std::error_code ec;
  fs::create_directories(registry().parent_path(), ec);
  std::ofstream(registry(), std::ios::app) << entry.dump() << "\n";
}

std::string find_validated_baseline(const std::string& model, const std::string& flavor,
                                    const std::string& dump_folder) {
  std::ifstream local(fs::path(dump_folder) / kValidatedBaselineFile);
  if (local) {
    const auto entry = nlohmann::json::parse(local, nullptr, /*allow_exceptions=*/false);
    if (same_model(entry, model, flavor)) return entry.value("runs", dump_folder);
  }
  std::ifstream recorded(registry());
  std::string found;
  for (std::string line; std::getline(recorded, line);) {
    const auto entry = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (same_model(entry, model, flavor)) found = entry.value("runs", "");
  }
  return found;
}

}  // namespace titan::cli
