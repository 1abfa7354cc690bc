#include "titan/components/data/token_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "titan/components/data/sha256.h"
#include "titan/errors.h"

namespace titan::components::data {
namespace unit_components_data_token_cache_test {

namespace fs = std::filesystem;
using testing_support::CountingByteTokenizer;
using testing_support::error_message;
using testing_support::read_file;
using testing_support::TempDir;
using testing_support::write_file;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<int32_t> ids(const TokenCache& cache) {
  return {cache.tokens(), cache.tokens() + cache.num_tokens()};
}

TokenCacheOptions in(const TempDir& dir) {
  TokenCacheOptions options;
  options.cache_dir = dir / "cache";
  return options;
}

DatasetSource one_file(const fs::path& file) { return {"test", {fs::canonical(file)}}; }

std::vector<std::string> cache_dir_entries(const TempDir& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "cache")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(TokenCache, FramesEachDocumentWithBosAndEos) {
  TempDir dir;
  write_file(dir / "d.jsonl", "{\"text\": \"ab\"}\n{\"text\": \"c\"}\n");
  CountingByteTokenizer tok;
  const TokenCache cache(one_file(dir / "d.jsonl"), tok, in(dir));
  EXPECT_EQ(ids(cache), (std::vector<int32_t>{256, 'a', 'b', 257, 256, 'c', 257}));
  EXPECT_EQ(cache.stats().documents, 2);
  EXPECT_EQ(cache.stats().tokens, 7);
  EXPECT_TRUE(cache.stats().built);

  CountingByteTokenizer no_bos(/*with_bos=*/false, /*with_eos=*/true, "test-bytes-no-bos");
  const TokenCache eos_only(one_file(dir / "d.jsonl"), no_bos, in(dir));
  EXPECT_EQ(ids(eos_only), (std::vector<int32_t>{'a', 'b', 257, 'c', 257}));
}

TEST(TokenCache, SecondOpenReusesTheCacheWithoutTokenizing) {
  TempDir dir;
  write_file(dir / "d.jsonl", "{\"text\": \"hello\"}\n{\"text\": \"world\"}\n");
  CountingByteTokenizer tok;
  const TokenCache first(one_file(dir / "d.jsonl"), tok, in(dir));
  EXPECT_EQ(tok.encode_calls, 2);
  const TokenCache second(one_file(dir / "d.jsonl"), tok, in(dir));
  EXPECT_EQ(tok.encode_calls, 2);
  EXPECT_FALSE(second.stats().built);
  EXPECT_EQ(ids(first), ids(second));
  EXPECT_EQ(second.stats().documents, 2);
  EXPECT_EQ(second.stats().cache_path, first.stats().cache_path);
  // Only the two cache files, no temporaries left behind.
  const auto entries = cache_dir_entries(dir);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_TRUE(entries[0].rfind("test-", 0) == 0 && fs::path(entries[0]).extension() == ".json");
  EXPECT_EQ(fs::path(entries[1]).extension(), ".tokens");
}

TEST(TokenCache, ChangedFileOrTokenizerGetsANewCache) {
  TempDir dir;
  const fs::path file = dir / "d.jsonl";
  write_file(file, "{\"text\": \"one\"}\n");
  CountingByteTokenizer tok;
  const int64_t before = TokenCache(one_file(file), tok, in(dir)).num_tokens();
  EXPECT_EQ(tok.encode_calls, 1);

  write_file(file, "{\"text\": \"one\"}\n{\"text\": \"two\"}\n");  // new size
  const TokenCache grown(one_file(file), tok, in(dir));
  EXPECT_EQ(tok.encode_calls, 3);
  EXPECT_TRUE(grown.stats().built);
  EXPECT_EQ(grown.num_tokens(), before + 5);

  write_file(file, "{\"text\": \"one\"}\n{\"text\": \"TWO\"}\n");  // same size, new mtime
  fs::last_write_time(file, fs::last_write_time(file) + std::chrono::seconds(2));
  const TokenCache edited(one_file(file), tok, in(dir));
  EXPECT_EQ(tok.encode_calls, 5);
  EXPECT_EQ(edited.tokens()[6], 'T');

  CountingByteTokenizer other(true, true, "other-tokenizer");
  const TokenCache again(one_file(file), other, in(dir));
  EXPECT_EQ(other.encode_calls, 2);
}

TEST(TokenCache, FilesRecordSizesAndSha256) {
  TempDir dir;
  write_file(dir / "a.txt", "alpha text");
  write_file(dir / "b.jsonl", "{\"text\": \"beta\"}\n");
  const DatasetSource source{"two", {fs::canonical(dir / "a.txt"), fs::canonical(dir / "b.jsonl")}};
  CountingByteTokenizer tok;
  for (int open = 0; open < 2; ++open) {  // built, then reused from the .json
    const TokenCache cache(source, tok, in(dir));
    ASSERT_EQ(cache.files().size(), 2u);
    EXPECT_EQ(cache.files()[0].path, source.files[0].string());
    EXPECT_EQ(cache.files()[0].bytes, 10);
    EXPECT_EQ(cache.files()[0].sha256, sha256_hex("alpha text"));
    EXPECT_EQ(cache.files()[1].sha256, sha256_hex(read_file(dir / "b.jsonl")));
    EXPECT_EQ(ids(cache), (std::vector<int32_t>{256, 'a', 'l', 'p', 'h', 'a', ' ', 't', 'e', 'x',
                                                't', 257, 256, 'b', 'e', 't', 'a', 257}));
  }
}

TEST(TokenCache, TruncatedCacheIsRebuilt) {
  TempDir dir;
  write_file(dir / "d.txt", "some text");
  CountingByteTokenizer tok;
  const std::string path = TokenCache(one_file(dir / "d.txt"), tok, in(dir)).stats().cache_path;
  fs::resize_file(path, 8);
  const TokenCache rebuilt(one_file(dir / "d.txt"), tok, in(dir));
  EXPECT_TRUE(rebuilt.stats().built);
  EXPECT_EQ(rebuilt.num_tokens(), 11);
  EXPECT_EQ(tok.encode_calls, 2);
}

TEST(TokenCache, NonBuilderWaitsForTheBuilder) {
  TempDir dir;
  write_file(dir / "d.txt", "shared by all ranks");
  CountingByteTokenizer tok;
  TokenCacheOptions waiting = in(dir);
  waiting.build = false;
  waiting.wait_timeout_s = 60;
  std::vector<int32_t> seen;
  std::thread follower([&] { seen = ids(TokenCache(one_file(dir / "d.txt"), tok, waiting)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const TokenCache leader(one_file(dir / "d.txt"), tok, in(dir));
  follower.join();
  EXPECT_EQ(seen, ids(leader));
  EXPECT_EQ(tok.encode_calls, 1);
}

TEST(TokenCache, NonBuilderTimesOutNamingTheCache) {
  TempDir dir;
  write_file(dir / "d.txt", "nobody builds this");
  CountingByteTokenizer tok;
  TokenCacheOptions waiting = in(dir);
  waiting.build = false;
  waiting.wait_timeout_s = 0.2;
  const std::string msg =
      error_message<DataError>([&] { TokenCache(one_file(dir / "d.txt"), tok, waiting); });
  EXPECT_TRUE(contains(msg, "did not appear within 0.2 s")) << msg;
  EXPECT_TRUE(contains(msg, (dir / "cache").string())) << msg;
  EXPECT_EQ(tok.encode_calls, 0);
}

TEST(TokenCache, BadDocumentFailsTheBuildAndLeavesNoFiles) {
  TempDir dir;
  write_file(dir / "d.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n");
  CountingByteTokenizer tok;
  const std::string msg =
      error_message<DataError>([&] { TokenCache(one_file(dir / "d.jsonl"), tok, in(dir)); });
  EXPECT_TRUE(contains(msg, "d.jsonl:2: no string field \"text\"")) << msg;
  EXPECT_TRUE(cache_dir_entries(dir).empty());
}

TEST(TokenCache, SkippedDocumentsAreCountedAndRememberedByTheCache) {
  TempDir dir;
  write_file(dir / "d.jsonl", "{\"text\": \"fine\"}\n{\"txt\": \"typo\"}\n{\"text\": \"ok\"}\n");
  CountingByteTokenizer tok;
  TokenCacheOptions skipping = in(dir);
  skipping.skip_bad = true;
  const TokenCache cache(one_file(dir / "d.jsonl"), tok, skipping);
  EXPECT_EQ(cache.stats().documents, 2);
  EXPECT_EQ(cache.stats().skipped, 1);
  ASSERT_EQ(cache.stats().skipped_examples.size(), 1u);
  EXPECT_TRUE(contains(cache.stats().skipped_examples[0], "d.jsonl:2:"));
  EXPECT_EQ(TokenCache(one_file(dir / "d.jsonl"), tok, skipping).stats().skipped, 1);

  // Reusing that cache without skip_bad still reports the bad document.
  const std::string msg =
      error_message<DataError>([&] { TokenCache(one_file(dir / "d.jsonl"), tok, in(dir)); });
  EXPECT_TRUE(contains(msg, "training.skip_bad_documents")) << msg;
  EXPECT_TRUE(contains(msg, "d.jsonl:2:")) << msg;
}

TEST(TokenCache, NothingLeftAfterSkippingIsAnError) {
  TempDir dir;
  write_file(dir / "d.jsonl", "garbage\n");
  CountingByteTokenizer tok;
  TokenCacheOptions skipping = in(dir);
  skipping.skip_bad = true;
  const std::string msg =
      error_message<DataError>([&] { TokenCache(one_file(dir / "d.jsonl"), tok, skipping); });
  EXPECT_TRUE(contains(msg, "no documents to train on (1 bad ones skipped")) << msg;
}

TEST(TokenCache, IdOutsideTheVocabularyIsAnError) {
  TempDir dir;
  write_file(dir / "d.txt", "ok\nnot ok: z");
  CountingByteTokenizer small(false, false, "small", /*vocab_size=*/120);  // 'z' is 122
  std::string msg =
      error_message<DataError>([&] { TokenCache(one_file(dir / "d.txt"), small, in(dir)); });
  EXPECT_TRUE(contains(msg, "d.txt:1: tokenizer small gave id 122 outside [0, 120)")) << msg;

  CountingByteTokenizer bos_outside(true, false, "bos-outside", /*vocab_size=*/256);
  msg = error_message<DataError>(
      [&] { TokenCache(one_file(dir / "d.txt"), bos_outside, in(dir)); });
  EXPECT_TRUE(contains(msg, "tokenizer bos-outside: BOS id 256 outside [0, 256)")) << msg;
}

TEST(TokenCache, DefaultFolderFollowsTitanCacheDir) {
  testing_support::ScopedEnv set("TITAN_CACHE_DIR", "/somewhere/tokens");
  EXPECT_EQ(default_token_cache_dir(), fs::path("/somewhere/tokens"));
  testing_support::ScopedEnv unset("TITAN_CACHE_DIR", std::nullopt);
  testing_support::ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_token_cache_dir(), fs::path("/home/someone/.cache/titan/tokens"));
}

}  // namespace unit_components_data_token_cache_test
}  // namespace titan::components::data
