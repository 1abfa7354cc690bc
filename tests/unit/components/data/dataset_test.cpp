#include "titan/components/data/dataset.h"

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"
#include "titan/errors.h"

namespace titan::components::data {
namespace unit_components_data_dataset_test {

using testing_support::error_message;
using testing_support::ScopedEnv;
using testing_support::TempDir;
using testing_support::write_file;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Dataset, UnknownNameIsAConfigErrorListingTheKnownNames) {
  const std::string msg = error_message<ConfigError>([] { resolve_dataset("c4_mini", ""); });
  EXPECT_TRUE(contains(msg, "unknown dataset 'c4_mini'")) << msg;
  EXPECT_TRUE(contains(msg, "kjv_bible")) << msg;
  EXPECT_EQ(dataset_names(), std::vector<std::string>{"kjv_bible"});
}

TEST(Dataset, KjvBibleNotPreparedTellsWhichScriptToRun) {
  TempDir dir;
  ScopedEnv env("TITAN_DATA_DIR", dir.path().string());
  const std::string msg = error_message<DataError>([] { resolve_dataset("kjv_bible", ""); });
  EXPECT_TRUE(contains(msg, (dir / "kjv_bible.jsonl").string() + " does not exist")) << msg;
  EXPECT_TRUE(contains(msg, "scripts/prepare_kjv_bible.sh")) << msg;
}

TEST(Dataset, KjvBibleResolvesUnderTheDataDir) {
  TempDir dir;
  ScopedEnv env("TITAN_DATA_DIR", dir.path().string());
  write_file(dir / "kjv_bible.jsonl", "{\"text\": \"stand-in\"}\n");
  const DatasetSource source = resolve_dataset("kjv_bible", "");
  EXPECT_EQ(source.label, "kjv_bible");
  ASSERT_EQ(source.files.size(), 1u);
  EXPECT_EQ(source.files[0], std::filesystem::canonical(dir / "kjv_bible.jsonl"));
}

TEST(Dataset, DataDirDefaultsUnderHome) {
  ScopedEnv unset("TITAN_DATA_DIR", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(dataset_dir(), std::filesystem::path("/home/someone/.cache/titan/datasets"));
}

TEST(Dataset, PathWinsOverName) {
  TempDir dir;
  write_file(dir / "mine.txt", "hello");
  const DatasetSource source = resolve_dataset("no_such_name", (dir / "mine.txt").string());
  EXPECT_EQ(source.label, "mine.txt");
  ASSERT_EQ(source.files.size(), 1u);
}

TEST(Dataset, MissingPathOrUnsupportedFileIsADataError) {
  TempDir dir;
  const std::string missing = (dir / "nope.jsonl").string();
  EXPECT_TRUE(contains(error_message<DataError>([&] { resolve_dataset("", missing); }),
                       "training.dataset_path " + missing));
  write_file(dir / "table.csv", "a,b\n");
  EXPECT_TRUE(contains(
      error_message<DataError>([&] { resolve_dataset("", (dir / "table.csv").string()); }),
      "unsupported dataset file type"));
}

TEST(Dataset, FolderGivesItsDocumentFilesRecursivelyInSortedOrder) {
  TempDir dir;
  write_file(dir / "b.jsonl", "{}");
  write_file(dir / "a" / "z.txt", "z");
  write_file(dir / "a" / "y.jsonl", "{}");
  write_file(dir / "c.txt", "c");
  write_file(dir / "notes.md", "ignored");
  write_file(dir / ".hidden.txt", "ignored");
  write_file(dir / ".cache" / "x.txt", "ignored");
  const DatasetSource source = resolve_dataset("", dir.path().string());
  const auto root = std::filesystem::canonical(dir.path());
  EXPECT_EQ(source.label, root.filename().string());
  EXPECT_EQ(source.files, (std::vector<std::filesystem::path>{root / "a" / "y.jsonl",
                                                               root / "a" / "z.txt",
                                                               root / "b.jsonl", root / "c.txt"}));
}

TEST(Dataset, FolderWithoutDocumentsIsADataError) {
  TempDir dir;
  write_file(dir / "readme.md", "nothing to train on");
  EXPECT_TRUE(contains(error_message<DataError>([&] { resolve_dataset("", dir.path().string()); }),
                       "holds no .jsonl or .txt dataset files"));
}

}  // namespace unit_components_data_dataset_test
}  // namespace titan::components::data
