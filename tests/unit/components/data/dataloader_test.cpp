#include "titan/components/data/dataloader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/skip.h"
#include "test_support.h"
#include "titan/components/data/sha256.h"
#include "titan/errors.h"

namespace titan::components::data {
namespace {

namespace fs = std::filesystem;
using testing_support::CountingByteTokenizer;
using testing_support::error_message;
using testing_support::read_file;
using testing_support::TempDir;
using testing_support::write_file;

std::vector<std::vector<int64_t>> rows(const torch::Tensor& t) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < t.size(0); ++i) {
    const torch::Tensor row = t[i].contiguous();
    out.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
  }
  return out;
}

DataLoaderOptions tiny(const TempDir& dir, const fs::path& data, int64_t seq_len, int64_t batch) {
  DataLoaderOptions options;
  options.dataset_path = data.string();
  options.seq_len = seq_len;
  options.local_batch_size = batch;
  options.cache_dir = dir / "cache";
  return options;
}

// Documents "ab" and "cde": tokens 256 a b 257 256 c d e 257 (T = 9). seq_len 2 gives
// N = (9 - 1) / 2 = 4 windows of 3 tokens: [256 a b] [b 257 256] [256 c d] [d e 257].
class PackingTest : public ::testing::Test {
 protected:
  void SetUp() override { write_file(dir_ / "d.jsonl", "{\"text\":\"ab\"}\n{\"text\":\"cde\"}\n"); }
  TempDir dir_;
  CountingByteTokenizer tok_;
};

TEST_F(PackingTest, WindowsShareOneBoundaryTokenAndLabelsAreShiftedInputs) {
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 4), tok_);
  EXPECT_EQ(loader.num_samples(), 4);
  EXPECT_EQ(loader.accumulation_steps(), 1);
  const Batch batch = loader.get(0, 0);
  EXPECT_EQ(batch.input.sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(batch.input.dtype(), torch::kInt64);
  EXPECT_EQ(batch.label.sizes(), (std::vector<int64_t>{4, 2}));
  using Rows = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(rows(batch.input), (Rows{{256, 'a'}, {'b', 257}, {256, 'c'}, {'d', 'e'}}));
  EXPECT_EQ(rows(batch.label), (Rows{{'a', 'b'}, {257, 256}, {'c', 'd'}, {'e', 257}}));
}

TEST_F(PackingTest, WithoutBosDocumentsAreSeparatedByEosOnly) {
  // Tokens a b 257 c d e 257 (T = 7); seq_len 3: N = 2, windows [a b 257 c] [c d e 257].
  CountingByteTokenizer eos_only(/*with_bos=*/false, /*with_eos=*/true, "eos-only");
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 3, 2), eos_only);
  EXPECT_EQ(loader.num_samples(), 2);
  const Batch batch = loader.get(0, 0);
  using Rows = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(rows(batch.input), (Rows{{'a', 'b', 257}, {'c', 'd', 'e'}}));
  EXPECT_EQ(rows(batch.label), (Rows{{'b', 257, 'c'}, {'d', 'e', 257}}));
}

TEST_F(PackingTest, RunningOutOfDataStartsOverFromSampleZero) {
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 3), tok_);  // N = 4, G = 3
  using Rows = std::vector<std::vector<int64_t>>;
  // Step 1 (after 3 samples) takes ordinals 3, 4, 5 = samples 3, 0, 1.
  EXPECT_EQ(rows(loader.get(3, 0).input), (Rows{{'d', 'e'}, {256, 'a'}, {'b', 257}}));
  EXPECT_EQ(loader.epoch(0), 0);
  EXPECT_EQ(loader.epoch(3), 0);   // step 1 starts in epoch 0, ends in epoch 1
  EXPECT_EQ(loader.epoch(6), 1);   // step 2: ordinals 6..8
  EXPECT_EQ(loader.epoch(12), 3);  // step 4: ordinals 12..14
  EXPECT_TRUE(torch::equal(loader.get(12, 0).input, loader.get(0, 0).input));  // 12 = 3 x 4
}

TEST_F(PackingTest, BatchesArePureFunctionsOfTheConsumedSamples) {
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 2), tok_);
  const Batch later = loader.get(14, 0);
  loader.get(0, 0);
  EXPECT_TRUE(torch::equal(loader.get(14, 0).input, later.input));
  EXPECT_TRUE(torch::equal(loader.get(14, 0).label, later.label));
  EXPECT_THROW(loader.get(-1, 0), std::out_of_range);
  EXPECT_THROW(loader.get(0, 1), std::out_of_range);
}

TEST_F(PackingTest, TooFewTokensForOneSampleIsADataError) {
  const std::string msg = error_message<DataError>(
      [&] { DataLoader(tiny(dir_, dir_ / "d.jsonl", 9, 1), tok_); });  // 9 tokens, 9 + 1 needed
  EXPECT_NE(msg.find("has 9 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("training.seq_len 9 needs 10"), std::string::npos) << msg;
}

TEST_F(PackingTest, InvalidOptionsAreConfigErrors) {
  EXPECT_THROW(DataLoader(tiny(dir_, dir_ / "d.jsonl", 0, 1), tok_), ConfigError);
  DataLoaderOptions options = tiny(dir_, dir_ / "d.jsonl", 2, 3);
  options.global_batch_size = 4;
  EXPECT_THROW(DataLoader(options, tok_), ConfigError);
  EXPECT_EQ(tok_.encode_calls, 0);  // rejected before any tokenizing
}

TEST(DataLoaderOptionsFromConfig, TakesTheTrainingSectionAndTheRankCoordinates) {
  config::JobConfig job;
  job.training.dataset = "kjv_bible";
  job.training.dataset_path = "/data/c4";
  job.training.seq_len = 512;
  job.training.local_batch_size = 4;
  job.training.global_batch_size = 32;
  job.training.skip_bad_documents = true;
  const DataLoaderOptions options = data_loader_options(job, 1, 2, /*local_rank=*/3);
  EXPECT_EQ(options.dataset, "kjv_bible");
  EXPECT_EQ(options.dataset_path, "/data/c4");
  EXPECT_EQ(options.seq_len, 512);
  EXPECT_EQ(options.local_batch_size, 4);
  EXPECT_EQ(options.global_batch_size, 32);
  EXPECT_EQ(options.dp_rank, 1);
  EXPECT_EQ(options.dp_degree, 2);
  EXPECT_TRUE(options.skip_bad_documents);
  EXPECT_FALSE(options.build_cache);
  EXPECT_TRUE(data_loader_options(job, 0, 2, /*local_rank=*/0).build_cache);
}

// The union of all (dp rank, microbatch) batches of a step is the same multiset of samples for
// every data-parallel degree and accumulation split of one global batch.
TEST(DataLoaderLayout, GlobalBatchIsIndependentOfDpDegreeAndAccumulation) {
  TempDir dir;
  std::string corpus;
  for (int i = 0; i < 40; ++i) {
    corpus += "{\"text\": \"document " + std::to_string(i) + std::string(i % 7, 'x') + "\"}\n";
  }
  write_file(dir / "corpus.jsonl", corpus);
  CountingByteTokenizer tok;
  const int64_t G = 16;
  const int64_t steps = 10;
  using Samples = std::vector<std::vector<int64_t>>;  // input row followed by label row
  std::vector<Samples> reference;  // per step, sorted

  for (int64_t dp : {1, 2, 4}) {
    for (int64_t accumulation : {1, 2, 4}) {
      std::vector<Samples> per_step(steps);
      for (int64_t rank = 0; rank < dp; ++rank) {
        DataLoaderOptions options = tiny(dir, dir / "corpus.jsonl", 5, G / (dp * accumulation));
        options.global_batch_size = G;
        options.dp_rank = rank;
        options.dp_degree = dp;
        const DataLoader loader(options, tok);
        ASSERT_EQ(loader.accumulation_steps(), accumulation);
        ASSERT_LT(loader.num_samples(), G * steps) << "the steps should wrap around";
        for (int64_t step = 0; step < steps; ++step) {
          for (int64_t m = 0; m < accumulation; ++m) {
            const Batch batch = loader.get(step * G, m);
            const auto inputs = rows(batch.input);
            const auto labels = rows(batch.label);
            for (size_t i = 0; i < inputs.size(); ++i) {
              std::vector<int64_t> sample = inputs[i];
              sample.insert(sample.end(), labels[i].begin(), labels[i].end());
              per_step[step].push_back(sample);
            }
          }
        }
      }
      for (Samples& s : per_step) std::sort(s.begin(), s.end());
      if (reference.empty()) {
        reference = per_step;
      } else {
        EXPECT_EQ(per_step, reference) << "dp " << dp << " accumulation " << accumulation;
      }
    }
  }
  EXPECT_EQ(tok.encode_calls, 40);  // tokenized once, reused by every loader
}

TEST(DataLoaderRealistic, TinyShakespeareThroughTheByteTokenizer) {
  const fs::path file = fs::path(TITAN_SHARED_DATA) / "corpora" / "tinyshakespeare.txt";
  ASSERT_TRUE(fs::exists(file)) << file;
  const std::string text = read_file(file);
  TempDir dir;
  CountingByteTokenizer tok;
  DataLoaderOptions options = tiny(dir, file, 256, 4);
  options.global_batch_size = 16;
  options.dp_degree = 2;
  options.dp_rank = 1;
  const DataLoader loader(options, tok);

  const int64_t total = static_cast<int64_t>(text.size()) + 2;  // BOS + bytes + EOS
  EXPECT_EQ(loader.stats().documents, 1);
  EXPECT_EQ(loader.stats().tokens, total);
  EXPECT_EQ(loader.num_samples(), (total - 1) / 256);
  EXPECT_EQ(loader.accumulation_steps(), 2);
  ASSERT_EQ(loader.files().size(), 1u);
  EXPECT_EQ(loader.files()[0].bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(loader.files()[0].sha256, sha256_hex(text));
  EXPECT_NE(loader.describe().find("tinyshakespeare.txt"), std::string::npos);

  // Step 0, microbatch 1, rank 1, row 0 is ordinal 1*2*4 + 1*4 = 12: tokens [12*256, 13*256]
  // are bytes [12*256 - 1, 13*256 - 1) of the file (token 0 is BOS).
  const Batch batch = loader.get(0, 1);
  const auto input = rows(batch.input)[0];
  const auto label = rows(batch.label)[0];
  const std::string expected = text.substr(12 * 256 - 1, 257);
  for (int64_t j = 0; j < 256; ++j) {
    ASSERT_EQ(input[j], static_cast<unsigned char>(expected[j])) << j;
    ASSERT_EQ(label[j], static_cast<unsigned char>(expected[j + 1])) << j;
  }

  // The last sample ends at the EOS when the windows fit exactly; otherwise inside the text.
  const int64_t last = loader.num_samples() - 1;
  DataLoaderOptions single = tiny(dir, file, 256, 1);
  const DataLoader one(single, tok);
  const Batch tail = one.get(last, 0);
  const int64_t end = (last + 1) * 256;  // index of the last label token
  const int64_t expected_last = end == total - 1 ? 257 : static_cast<unsigned char>(text[end - 1]);
  EXPECT_EQ(tail.label[0][255].item<int64_t>(), expected_last);
  EXPECT_EQ(tok.encode_calls, 1);
}

// The real kjv_bible, when scripts/prepare_kjv_bible.sh has written it on this machine.
TEST(DataLoaderRealistic, KjvBibleWhenPrepared) {
  if (!fs::exists(dataset_dir() / "kjv_bible.jsonl")) {
    TITAN_SKIP_OR_FAIL("run scripts/prepare_kjv_bible.sh to include this test");
  }
  TempDir dir;
  CountingByteTokenizer tok;
  DataLoaderOptions options;
  options.dataset = "kjv_bible";
  options.seq_len = 2048;
  options.local_batch_size = 8;
  options.cache_dir = dir / "cache";
  const DataLoader loader(options, tok);
  EXPECT_EQ(loader.stats().documents, 1189);  // chapters
  EXPECT_EQ(loader.stats().skipped, 0);
  const Batch batch = loader.get(0, 0);
  EXPECT_EQ(batch.input[0][0].item<int64_t>(), 256);
  std::string start;
  for (int j = 1; j <= 9; ++j) {
    start.push_back(static_cast<char>(batch.input[0][j].item<int64_t>()));
  }
  EXPECT_EQ(start, "Genesis 1");
}

}  // namespace
}  // namespace titan::components::data
