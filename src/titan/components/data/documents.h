// Reading documents out of dataset files, with the bad-data policy: every bad document is either
// a DataError naming the file and line, or (with skip_bad, config key
// training.skip_bad_documents) skipped and counted.
//
// Formats, chosen by file extension:
// - `.jsonl` (the C4 layout): one JSON object per line with a string field "text" (other fields
//   are ignored). Lines are split at '\n' (a '\r' before it is dropped); lines holding only
//   spaces or tabs are not documents and are passed over silently.
// - `.txt`: the whole file is one document, byte for byte.
// A file is bad as a whole when it has no documents (empty). A document is bad when its line is
// not valid UTF-8, not JSON, not an object, or has no string "text".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace titan::components::data {

enum class DocumentFormat { kJsonLines, kPlainText };

/// The format of `file` by its extension; throws DataError naming the file and the supported
/// extensions (.jsonl, .txt) otherwise.
DocumentFormat document_format(const std::filesystem::path& file);

/// True when `file` has an extension document_format() accepts.
bool is_document_file(const std::filesystem::path& file);

/// What reading found: documents delivered and bad ones skipped.
struct DocumentStats {
  /// How many reasons `skipped_examples` keeps.
  static constexpr size_t kMaxExamples = 5;

  int64_t documents = 0;
  int64_t skipped = 0;  // bad documents and empty files skipped under skip_bad
  std::vector<std::string> skipped_examples;  // the first reasons, "file:line: what is wrong"
};

/// Called once per document in file order: its text (valid UTF-8; a view valid only during the
/// call) and its 1-based line (the line it starts on).
using DocumentCallback = std::function<void(std::string_view text, int64_t line)>;

/// Reads the documents of `bytes`, the content of `file` (named in messages) in `format`.
/// Throws DataError "file:line: ..." at the first bad document, or with `skip_bad` skips it,
/// adding to `stats`.
void for_each_document(std::string_view bytes, const std::filesystem::path& file,
                       DocumentFormat format, bool skip_bad, DocumentStats& stats,
                       const DocumentCallback& on_document);

}  // namespace titan::components::data
