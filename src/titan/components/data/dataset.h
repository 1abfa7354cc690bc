// Which files make up a dataset: a registered name (training.dataset) or a file or folder
// (training.dataset_path, which wins when set).
//
// Registered names map to files prepared once on the machine under dataset_dir():
//   kjv_bible -> kjv_bible.jsonl, the King James Bible from Debian's bible-kjv package, one
//                chapter per document, written by scripts/prepare_kjv_bible.sh.
// A path is a .jsonl or .txt file (see documents.h), or a folder: every .jsonl and .txt file
// below it, recursively, in sorted path order; names starting with '.' are passed over.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace titan::components::data {

struct DatasetSource {
  /// The name, or the path's last component: names the token cache file and appears in logs.
  std::string label;
  /// Absolute, canonical paths of the document files, in reading order; never empty.
  std::vector<std::filesystem::path> files;
};

/// Folder of prepared named datasets: $TITAN_DATA_DIR, else $HOME/.cache/titan/datasets.
std::filesystem::path dataset_dir();

/// The registered dataset names, sorted.
std::vector<std::string> dataset_names();

/// Resolves `path` when non-empty, else the registered `name`.
/// Throws ConfigError for an unknown name (listing the registered ones); DataError for a missing
/// path, an unsupported file type, a folder with no .jsonl/.txt files, or a named dataset not
/// prepared yet (the message says which script prepares it).
DatasetSource resolve_dataset(const std::string& name, const std::string& path);

}  // namespace titan::components::data
