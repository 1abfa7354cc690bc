#include "titan/components/data/dataset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "titan/components/data/documents.h"
#include "titan/errors.h"
#include "titan/platform/env.h"

namespace titan::components::data {
namespace fs = std::filesystem;
namespace {

// A dataset prepared once per machine by a script into dataset_dir().
struct RegisteredDataset {
  const char* file_name;
  const char* prepare_script;  // relative to the source tree
  const char* what;
};

const std::map<std::string, RegisteredDataset>& registry() {
  static const std::map<std::string, RegisteredDataset> table = {
      {"kjv_bible",
       {"kjv_bible.jsonl", "scripts/prepare_kjv_bible.sh",
        "the King James Bible from Debian's bible-kjv package, one chapter per document"}},
  };
  return table;
}

bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

std::vector<fs::path> folder_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink,
                                             ec);
  if (ec) throw DataError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw DataError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
    if (is_hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_document_file(it->path())) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw DataError(fmt::format("{}: folder holds no .jsonl or .txt dataset files",
                                dir.string()));
  }
  return files;
}

DatasetSource from_path(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::canonical(path, ec);
  if (ec) {
    throw DataError(fmt::format("training.dataset_path {}: {}", path, ec.message()));
  }
  DatasetSource source;
  source.label = p.filename().string();
  if (fs::is_directory(p)) {
    source.files = folder_files(p);
  } else {
    document_format(p);  // throws on an unsupported extension
    source.files = {p};
  }
  return source;
}

}  // namespace

fs::path dataset_dir() { return platform::titan_cache_dir("TITAN_DATA_DIR", "datasets"); }

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : registry()) names.push_back(name);
  return names;
}

DatasetSource resolve_dataset(const std::string& name, const std::string& path) {
  if (!path.empty()) return from_path(path);
  auto it = registry().find(name);
  if (it == registry().end()) {
    throw ConfigError(fmt::format(
        "training.dataset: unknown dataset '{}'; registered: {} (or point "
        "training.dataset_path at a .jsonl/.txt file or a folder of them)",
        name, fmt::join(dataset_names(), ", ")));
  }
  const RegisteredDataset& entry = it->second;
  const fs::path file = dataset_dir() / entry.file_name;
  if (!fs::is_regular_file(file)) {
    throw DataError(fmt::format(
        "dataset '{}' ({}) is not prepared: {} does not exist; run {}/{} once to write it "
        "(TITAN_DATA_DIR selects another folder)",
        name, entry.what, file.string(), TITAN_SOURCE_DIR, entry.prepare_script));
  }
  return {name, {fs::canonical(file)}};
}

}  // namespace titan::components::data
