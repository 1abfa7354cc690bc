#include "titan/components/data/documents.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "titan/errors.h"
#include "test_support.h"

namespace titan::components::data {
namespace unit_components_data_documents_test {

using testing_support::error_message;

struct Read {
  std::vector<std::pair<std::string, int64_t>> docs;  // text, line
  DocumentStats stats;
};

Read read(const std::string& bytes, const std::string& file, bool skip_bad = false) {
  Read out;
  for_each_document(bytes, file, document_format(file), skip_bad, out.stats,
                    [&](std::string_view text, int64_t line) {
                      out.docs.emplace_back(std::string(text), line);
                    });
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Documents, JsonLinesGivesTheTextFieldOfEachLine) {
  const Read r = read(
      "{\"text\": \"first\", \"url\": \"x\"}\n"
      "\n"
      "  \t\n"
      "{\"meta\": 1, \"text\": \"caf\\u00e9\\nline\"}\r\n"
      "{\"text\": \"\"}",
      "docs.jsonl");
  ASSERT_EQ(r.docs.size(), 3u);
  EXPECT_EQ(r.docs[0], std::make_pair(std::string("first"), int64_t{1}));
  EXPECT_EQ(r.docs[1], std::make_pair(std::string("caf\xC3\xA9\nline"), int64_t{4}));
  EXPECT_EQ(r.docs[2], std::make_pair(std::string(""), int64_t{5}));
  EXPECT_EQ(r.stats.documents, 3);
  EXPECT_EQ(r.stats.skipped, 0);
}

TEST(Documents, PlainTextFileIsOneDocument) {
  const Read r = read("line one\n\nline three\n", "book.txt");
  ASSERT_EQ(r.docs.size(), 1u);
  EXPECT_EQ(r.docs[0].first, "line one\n\nline three\n");
}

TEST(Documents, NonJsonLineNamesFileAndLine) {
  const std::string msg = error_message<DataError>(
      [] { read("{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": oops}\n", "c4.jsonl"); });
  EXPECT_TRUE(contains(msg, "c4.jsonl:3: not valid JSON")) << msg;
}

TEST(Documents, MissingOrNonStringTextNamesFileAndLine) {
  std::string msg = error_message<DataError>(
      [] { read("{\"text\": \"a\"}\n{\"content\": \"b\"}\n", "d.jsonl"); });
  EXPECT_TRUE(contains(msg, "d.jsonl:2: no string field \"text\" (missing)")) << msg;
  msg = error_message<DataError>([] { read("{\"text\": 42}\n", "d.jsonl"); });
  EXPECT_TRUE(contains(msg, "d.jsonl:1: no string field \"text\"")) << msg;
  EXPECT_TRUE(contains(msg, "number")) << msg;
  msg = error_message<DataError>([] { read("[\"text\"]\n", "d.jsonl"); });
  EXPECT_TRUE(contains(msg, "d.jsonl:1: expected a JSON object")) << msg;
}

TEST(Documents, InvalidUtf8NamesFileAndLine) {
  std::string msg = error_message<DataError>(
      [] { read("{\"text\": \"ok\"}\n{\"text\": \"bad \xC3\x28\"}\n", "u.jsonl"); });
  EXPECT_TRUE(contains(msg, "u.jsonl:2: invalid UTF-8 at column 15")) << msg;
  msg = error_message<DataError>([] { read("one\ntwo\nthr\xFF" "ee\n", "u.txt"); });
  EXPECT_TRUE(contains(msg, "u.txt:3: invalid UTF-8 at column 4")) << msg;
}

TEST(Documents, EmptyFileIsAnError) {
  EXPECT_TRUE(contains(error_message<DataError>([] { read("", "empty.jsonl"); }),
                       "empty.jsonl: empty file"));
  EXPECT_TRUE(contains(error_message<DataError>([] { read("\n \n", "blank.jsonl"); }),
                       "blank.jsonl: empty file"));
  EXPECT_TRUE(contains(error_message<DataError>([] { read("", "empty.txt"); }),
                       "empty.txt: empty file"));
}

TEST(Documents, SkipModeCountsBadDocumentsAndKeepsTheFirstReasons) {
  std::string bytes;
  for (int i = 0; i < 10; ++i) bytes += i % 2 == 0 ? "{\"text\": \"good\"}\n" : "not json\n";
  bytes += "{\"text\": \"bad \xFF\"}\n";
  const Read r = read(bytes, "mixed.jsonl", /*skip_bad=*/true);
  EXPECT_EQ(r.stats.documents, 5);
  EXPECT_EQ(r.stats.skipped, 6);
  ASSERT_EQ(r.stats.skipped_examples.size(), DocumentStats::kMaxExamples);
  EXPECT_TRUE(contains(r.stats.skipped_examples[0], "mixed.jsonl:2: not valid JSON"));
  EXPECT_TRUE(contains(r.stats.skipped_examples[4], "mixed.jsonl:10: not valid JSON"));
  ASSERT_EQ(r.docs.size(), 5u);
  EXPECT_EQ(r.docs[4].second, 9);

  const Read empty = read("", "empty.txt", /*skip_bad=*/true);
  EXPECT_EQ(empty.stats.skipped, 1);
  EXPECT_TRUE(empty.docs.empty());
}

TEST(Documents, UnsupportedExtensionIsAnError) {
  EXPECT_TRUE(contains(error_message<DataError>([] { document_format("data.csv"); }),
                       "data.csv: unsupported dataset file type '.csv'"));
  EXPECT_TRUE(is_document_file("a/b.jsonl"));
  EXPECT_FALSE(is_document_file("a/b.json"));
}

}  // namespace unit_components_data_documents_test
}  // namespace titan::components::data
