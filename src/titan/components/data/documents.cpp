#include "titan/components/data/documents.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "titan/components/data/utf8.h"
#include "titan/errors.h"

namespace titan::components::data {
namespace {

// Where a bad document goes: thrown, or counted when skipping.
class BadDocumentPolicy {
 public:
  BadDocumentPolicy(bool skip_bad, DocumentStats& stats) : skip_bad_(skip_bad), stats_(stats) {}

  void report(std::string message) {
    if (!skip_bad_) throw DataError(message);
    ++stats_.skipped;
    if (stats_.skipped_examples.size() < DocumentStats::kMaxExamples) {
      stats_.skipped_examples.push_back(std::move(message));
    }
  }

 private:
  bool skip_bad_;
  DocumentStats& stats_;
};

// 1-based line of byte `offset` in `bytes`.
int64_t line_of(std::string_view bytes, size_t offset) {
  return 1 + std::count(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// nlohmann's message without its "[json.exception...] parse error at line 1," prefix (our lines
// are single lines), and cut short: "last read" can quote a whole long string.
std::string json_reason(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  const size_t column = what.find("column");
  if (column != std::string::npos) what = what.substr(column);
  constexpr size_t kMaxChars = 160;
  if (what.size() > kMaxChars) what = what.substr(0, kMaxChars) + "...";
  return what;
}

void read_plain_text(std::string_view bytes, const std::string& file, BadDocumentPolicy& bad,
                     DocumentStats& stats, const DocumentCallback& on_document) {
  if (auto invalid = find_invalid_utf8(bytes)) {
    const size_t newline = *invalid == 0 ? std::string_view::npos : bytes.rfind('\n', *invalid - 1);
    const size_t column = newline == std::string_view::npos ? *invalid + 1 : *invalid - newline;
    bad.report(fmt::format("{}:{}: invalid UTF-8 at column {} (byte offset {})", file,
                           line_of(bytes, *invalid), column, *invalid));
    return;
  }
  ++stats.documents;
  on_document(bytes, 1);
}

void read_json_lines(std::string_view bytes, const std::string& file, BadDocumentPolicy& bad,
                     DocumentStats& stats, const DocumentCallback& on_document) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < bytes.size()) {
    ++line_no;
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) continue;

    if (auto invalid = find_invalid_utf8(line)) {
      bad.report(fmt::format("{}:{}: invalid UTF-8 at column {}", file, line_no, *invalid + 1));
      continue;
    }
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line.begin(), line.end());
    } catch (const nlohmann::json::parse_error& e) {
      bad.report(fmt::format("{}:{}: not valid JSON ({})", file, line_no, json_reason(e)));
      continue;
    }
    if (!doc.is_object()) {
      bad.report(fmt::format("{}:{}: expected a JSON object with a string \"text\", found a {}",
                             file, line_no, doc.type_name()));
      continue;
    }
    auto text = doc.find("text");
    if (text == doc.end() || !text->is_string()) {
      bad.report(fmt::format("{}:{}: no string field \"text\" ({})", file, line_no,
                             text == doc.end() ? std::string("missing")
                                               : std::string("it is a ") + text->type_name()));
      continue;
    }
    ++stats.documents;
    on_document(text->get_ref<const std::string&>(), line_no);
  }
}

}  // namespace

DocumentFormat document_format(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".jsonl") return DocumentFormat::kJsonLines;
  if (ext == ".txt") return DocumentFormat::kPlainText;
  throw DataError(fmt::format(
      "{}: unsupported dataset file type '{}'; expected .jsonl (JSON Lines with a \"text\" "
      "field) or .txt (one document per file)",
      file.string(), ext));
}

bool is_document_file(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".jsonl" || ext == ".txt";
}

void for_each_document(std::string_view bytes, const std::filesystem::path& file,
                       DocumentFormat format, bool skip_bad, DocumentStats& stats,
                       const DocumentCallback& on_document) {
  BadDocumentPolicy bad(skip_bad, stats);
  const std::string name = file.string();
  const int64_t before = stats.documents;
  if (format == DocumentFormat::kPlainText) {
    if (!bytes.empty()) read_plain_text(bytes, name, bad, stats, on_document);
  } else {
    read_json_lines(bytes, name, bad, stats, on_document);
  }
  if (stats.documents == before && bytes.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    bad.report(fmt::format("{}: empty file (no documents)", name));
  }
}

}  // namespace titan::components::data
