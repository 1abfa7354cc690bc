#include "titan/tools/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "titan/config/resolve.h"
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

// A record's numeric field; nlohmann writes NaN as null, so null reads back as NaN (a diverged
// step), not as a malformed record.
double number_field(const nlohmann::json& record, const char* key, const std::string& where) {
  if (!record.contains(key)) {
    throw DataError(fmt::format("{}: the record has no \"{}\"", where, key));
  }
  const auto& v = record[key];
  if (!v.is_number() && !v.is_null()) {
    throw DataError(fmt::format("{}: \"{}\" must be a number", where, key));
  }
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}

// metrics.jsonl: one object per line.
std::vector<StepPoint> read_points(const fs::path& path) {
  std::ifstream in = open_input(path);
  std::map<int64_t, StepPoint> by_step;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path.string(), line_no);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw DataError(fmt::format("{}: not valid JSON ({})", where, e.what()));
    }
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) {
      throw DataError(fmt::format("{}: expected a JSON object with an integer \"step\"", where));
    }
    const int64_t step = record["step"].get<int64_t>();
    by_step[step] = {step, number_field(record, "loss", where),
                     number_field(record, "grad_norm", where)};
  }
  if (by_step.empty()) throw DataError(fmt::format("{}: no metrics records", path.string()));
  std::vector<StepPoint> points;
  for (const auto& [step, point] : by_step) points.push_back(point);
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

// training.seq_len of the run's resolved config (manifest config_toml), 0 when unknown.
int64_t seq_len_of(const RunRecord& run) {
  const auto it = run.manifest.find("config_toml");
  if (it == run.manifest.end() || !it->is_string()) return 0;
  config::JobConfig job;
  try {
    config::apply_toml(job, it->get<std::string>(), (run.folder / "run_manifest.json").string());
  } catch (const ConfigError&) {
    return 0;
  }
  return job.training.seq_len;
}

// The manifest's <section>.<key>, or null.
nlohmann::json value_at(const RunRecord& run, const char* section, const char* key) {
  const auto s = run.manifest.find(section);
  if (s == run.manifest.end() || !s->is_object() || !s->contains(key)) return nullptr;
  return (*s)[key];
}

}  // namespace

std::vector<std::string> changed_variables(const RunRecord& a, const RunRecord& b) {
  std::vector<std::string> out;
  const auto differs = [](const nlohmann::json& x, const nlohmann::json& y) {
    return !x.is_null() && !y.is_null() && x != y;
  };
  if (differs(value_at(a, "model", "name"), value_at(b, "model", "name")) ||
      differs(value_at(a, "model", "flavor"), value_at(b, "model", "flavor"))) {
    out.push_back("model");
  }
  const int64_t seq_a = seq_len_of(a), seq_b = seq_len_of(b);
  const auto tokens_a = value_at(a, "data", "tokens_per_step");
  const auto tokens_b = value_at(b, "data", "tokens_per_step");
  if (seq_a > 0 && seq_b > 0 && tokens_a.is_number_integer() && tokens_b.is_number_integer() &&
      tokens_a.get<int64_t>() / seq_a != tokens_b.get<int64_t>() / seq_b) {
    out.push_back("batch");
  }
  if (seq_a > 0 && seq_b > 0 && seq_a != seq_b) out.push_back("sequence");
  if (differs(value_at(a, "world", "layout"), value_at(b, "world", "layout"))) {
    out.push_back("layout");
  }
  return out;
}

RunRecord read_run(const fs::path& folder) {
  if (!fs::is_directory(folder)) {
    throw DataError(fmt::format("{}: no such run folder", folder.string()));
  }
  RunRecord run;
  run.folder = folder;
  run.points = read_points(folder / "metrics.jsonl");
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

RunComparison compare_runs(const RunRecord& a, const RunRecord& b, double rtol,
                           double grad_rtol) {
  RunComparison c;
  c.rtol = rtol;
  c.grad_rtol = grad_rtol;
  const auto& pa = a.points;
  const auto& pb = b.points;
  auto track = [](MaxDiff& max, double diff, int64_t step, bool first) {
    if (first || diff > max.value) max = {diff, step};
  };
  size_t i = 0, j = 0;
  while (i < pa.size() || j < pb.size()) {
    if (j == pb.size() || (i < pa.size() && pa[i].step < pb[j].step)) {
      ++c.only_in_a, ++i;
    } else if (i == pa.size() || pb[j].step < pa[i].step) {
      ++c.only_in_b, ++j;
    } else {
      StepDiff d{pa[i], pb[j], relative_difference(pa[i].loss, pb[j].loss),
                 relative_difference(pa[i].grad_norm, pb[j].grad_norm)};
      const bool bad = !(d.loss_rel_diff <= rtol) || !(d.grad_norm_rel_diff <= grad_rtol);
      if (!c.first_bad_step && bad) c.first_bad_step = d.a.step;
      track(c.max_loss_diff, d.loss_rel_diff, d.a.step, c.steps.empty());
      track(c.max_grad_norm_diff, d.grad_norm_rel_diff, d.a.step, c.steps.empty());
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
