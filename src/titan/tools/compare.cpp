#include "titan/tools/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "titan/errors.h"

namespace titan::tools {
namespace fs = std::filesystem;
namespace {

std::ifstream open_input(const fs::path& path) {
  std::ifstream in(path);
  if (!fs::is_regular_file(path) || !in) {
    throw DataError(fmt::format("cannot read {}: no such file", path.string()));
  }
  return in;
}

// metrics.jsonl: one object per line. nlohmann writes a NaN loss as null, so null reads back
// as NaN (a diverged step), not as a malformed record.
std::vector<LossPoint> read_losses(const fs::path& path) {
  std::ifstream in = open_input(path);
  std::map<int64_t, double> by_step;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [&] { return fmt::format("{}:{}", path.string(), line_no); };
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw DataError(fmt::format("{}: not valid JSON ({})", where(), e.what()));
    }
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) {
      throw DataError(fmt::format("{}: expected a JSON object with an integer \"step\"", where()));
    }
    if (!record.contains("loss")) {
      throw DataError(fmt::format("{}: the record has no \"loss\"", where()));
    }
    const auto& loss = record["loss"];
    if (!loss.is_number() && !loss.is_null()) {
      throw DataError(fmt::format("{}: \"loss\" must be a number", where()));
    }
    by_step[record["step"].get<int64_t>()] =
        loss.is_null() ? std::numeric_limits<double>::quiet_NaN() : loss.get<double>();
  }
  if (by_step.empty()) throw DataError(fmt::format("{}: no metrics records", path.string()));
  std::vector<LossPoint> points;
  for (const auto& [step, value] : by_step) points.push_back({step, value});
  return points;
}

nlohmann::json read_manifest(const fs::path& path) {
  std::ifstream in = open_input(path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

// The manifest value at <section>.<key>, which must have the JSON type `check` accepts.
const nlohmann::json& manifest_field(const RunRecord& run, const std::string& section,
                                     const std::string& key,
                                     bool (nlohmann::json::*check)() const noexcept) {
  const auto& m = run.manifest;
  if (!m.is_object() || !m.contains(section) || !m[section].contains(key) ||
      !(m[section][key].*check)()) {
    throw DataError(fmt::format("{}: missing or mistyped field {}.{}",
                                (run.folder / "run_manifest.json").string(), section, key));
  }
  return m[section][key];
}

// A scalar field's value for messages: strings without their JSON quotes.
std::string field_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::vector<std::string> sorted_hashes(const RunRecord& run) {
  std::vector<std::string> hashes;
  for (const auto& file : manifest_field(run, "data", "files", &nlohmann::json::is_array)) {
    if (!file.is_object() || !file.contains("sha256") || !file["sha256"].is_string()) {
      throw DataError(fmt::format("{}: an entry of data.files has no \"sha256\" string",
                                  (run.folder / "run_manifest.json").string()));
    }
    hashes.push_back(file["sha256"].get<std::string>());
  }
  std::sort(hashes.begin(), hashes.end());
  return hashes;
}

}  // namespace

RunRecord read_run(const fs::path& folder) {
  if (!fs::is_directory(folder)) {
    throw DataError(fmt::format("{}: no such run folder", folder.string()));
  }
  RunRecord run;
  run.folder = folder;
  run.losses = read_losses(folder / "metrics.jsonl");
  run.manifest = read_manifest(folder / "run_manifest.json");
  return run;
}

std::vector<Incompatibility> incompatibilities(const RunRecord& a, const RunRecord& b) {
  struct Field {
    const char* section;
    const char* key;
    bool (nlohmann::json::*check)() const noexcept;
  };
  const Field fields[] = {{"model", "name", &nlohmann::json::is_string},
                          {"model", "flavor", &nlohmann::json::is_string},
                          {"data", "tokens_per_step", &nlohmann::json::is_number_integer},
                          {"data", "tokenizer", &nlohmann::json::is_string}};
  std::vector<Incompatibility> found;
  for (const Field& f : fields) {
    const auto& value_a = manifest_field(a, f.section, f.key, f.check);
    const auto& value_b = manifest_field(b, f.section, f.key, f.check);
    if (value_a != value_b) {
      found.push_back({fmt::format("{}.{}", f.section, f.key), field_text(value_a),
                       field_text(value_b)});
    }
  }
  auto hashes_a = sorted_hashes(a);
  auto hashes_b = sorted_hashes(b);
  if (hashes_a != hashes_b) {
    found.push_back({"data.files[].sha256", fmt::format("[{}]", fmt::join(hashes_a, ", ")),
                     fmt::format("[{}]", fmt::join(hashes_b, ", "))});
  }
  return found;
}

double relative_difference(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
  if (a == b) return 0.0;
  if (a == 0.0) return std::numeric_limits<double>::infinity();
  return std::abs(b - a) / std::abs(a);
}

LossComparison compare_losses(const RunRecord& a, const RunRecord& b, double rtol) {
  LossComparison c;
  c.rtol = rtol;
  size_t i = 0, j = 0;
  while (i < a.losses.size() || j < b.losses.size()) {
    if (j == b.losses.size() || (i < a.losses.size() && a.losses[i].step < b.losses[j].step)) {
      ++c.only_in_a, ++i;
    } else if (i == a.losses.size() || b.losses[j].step < a.losses[i].step) {
      ++c.only_in_b, ++j;
    } else {
      StepDiff d{a.losses[i].step, a.losses[i].loss, b.losses[j].loss,
                 relative_difference(a.losses[i].loss, b.losses[j].loss)};
      if (!c.first_bad_step && !(d.rel_diff <= rtol)) c.first_bad_step = d.step;
      if (c.steps.empty() || d.rel_diff > c.max_rel_diff) {
        c.max_rel_diff = d.rel_diff;
        c.max_rel_diff_step = d.step;
      }
      c.steps.push_back(d);
      ++i, ++j;
    }
  }
  if (c.steps.empty()) {
    throw DataError(fmt::format("{} and {} have no logged step in common (metrics.jsonl)",
                                a.folder.string(), b.folder.string()));
  }
  return c;
}

}  // namespace titan::tools
