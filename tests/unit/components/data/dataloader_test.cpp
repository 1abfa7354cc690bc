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
namespace unit_components_data_dataloader_test {

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
// N = 9 / 3 = 3 disjoint windows of 3 tokens: [256 a b] [257 256 c] [d e 257].
class PackingTest : public ::testing::Test {
 protected:
  void SetUp() override { write_file(dir_ / "d.jsonl", "{\"text\":\"ab\"}\n{\"text\":\"cde\"}\n"); }
  TempDir dir_;
  CountingByteTokenizer tok_;
};

TEST_F(PackingTest, WindowsAreDisjointAndLabelsAreShiftedInputs) {
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 3), tok_);
  EXPECT_EQ(loader.num_samples(), 3);
  EXPECT_EQ(loader.accumulation_steps(), 1);
  const Batch batch = loader.get(0, 0);
  EXPECT_EQ(batch.input.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(batch.input.dtype(), torch::kInt64);
  EXPECT_EQ(batch.label.sizes(), (std::vector<int64_t>{3, 2}));
  using Rows = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(rows(batch.input), (Rows{{256, 'a'}, {257, 256}, {'d', 'e'}}));
  EXPECT_EQ(rows(batch.label), (Rows{{'a', 'b'}, {256, 'c'}, {'e', 257}}));
}

TEST_F(PackingTest, WithoutBosDocumentsAreSeparatedByEosOnly) {
  // Tokens a b 257 c d e 257 (T = 7); seq_len 2: N = 2, windows [a b 257] [c d e].
  CountingByteTokenizer eos_only(/*with_bos=*/false, /*with_eos=*/true, "eos-only");
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 2), eos_only);
  EXPECT_EQ(loader.num_samples(), 2);
  const Batch batch = loader.get(0, 0);
  using Rows = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(rows(batch.input), (Rows{{'a', 'b'}, {'c', 'd'}}));
  EXPECT_EQ(rows(batch.label), (Rows{{'b', 257}, {'d', 'e'}}));
}

TEST_F(PackingTest, RunningOutOfDataStartsOverFromSampleZero) {
  const DataLoader loader(tiny(dir_, dir_ / "d.jsonl", 2, 2), tok_);  // N = 3, G = 2
  using Rows = std::vector<std::vector<int64_t>>;
  // Step 1 (after 2 samples) takes ordinals 2, 3 = samples 2, 0.
  EXPECT_EQ(rows(loader.get(2, 0).input), (Rows{{'d', 'e'}, {256, 'a'}}));
  EXPECT_EQ(loader.epoch(0), 0);
  EXPECT_EQ(loader.epoch(2), 0);   // step 1 starts in epoch 0, ends in epoch 1
  EXPECT_EQ(loader.epoch(4), 1);   // step 2: ordinals 4, 5
  EXPECT_EQ(loader.epoch(12), 4);  // step 6: ordinals 12, 13
  EXPECT_TRUE(torch::equal(loader.get(12, 0).input, loader.get(0, 0).input));  // 12 = 4 x 3
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

// TorchTitan 0.2.2's HuggingFaceTextDataset, written out independently of the loader: each
// document is tokenized with BOS and EOS and appended to a buffer, and every time the buffer
// holds seq_len + 1 tokens they are taken off its front as one sample.
std::vector<std::vector<int64_t>> torchtitan_windows(const std::vector<std::string>& documents,
                                                     int64_t seq_len) {
  std::vector<std::vector<int64_t>> samples;
  std::vector<int64_t> buffer;
  for (const std::string& text : documents) {
    buffer.push_back(256);
    for (unsigned char c : text) buffer.push_back(c);
    buffer.push_back(257);
    while (static_cast<int64_t>(buffer.size()) >= seq_len + 1) {
      samples.emplace_back(buffer.begin(), buffer.begin() + seq_len + 1);
      buffer.erase(buffer.begin(), buffer.begin() + seq_len + 1);
    }
  }
  return samples;
}

class TorchTitanWindowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string corpus;
    for (int i = 0; i < 30; ++i) {
      documents_.push_back("doc " + std::to_string(i) + std::string(i % 5, 'y'));
      corpus += "{\"text\": \"" + documents_.back() + "\"}\n";
    }
    write_file(dir_ / "corpus.jsonl", corpus);
  }
  // The samples rank `rank` of `dp` reads for the step after `consumed` samples, as windows
  // (input followed by the label's last token).
  std::vector<std::vector<int64_t>> step_samples(int64_t local, int64_t global, int64_t dp,
                                                 int64_t consumed) {
    std::vector<std::vector<int64_t>> out;
    for (int64_t rank = 0; rank < dp; ++rank) {
      DataLoaderOptions options = tiny(dir_, dir_ / "corpus.jsonl", kSeqLen, local);
      options.global_batch_size = global;
      options.dp_rank = rank;
      options.dp_degree = dp;
      const DataLoader loader(options, tok_);
      for (int64_t m = 0; m < loader.accumulation_steps(); ++m) {
        const Batch batch = loader.get(consumed, m);
        const auto inputs = rows(batch.input);
        const auto labels = rows(batch.label);
        for (size_t i = 0; i < inputs.size(); ++i) {
          out.push_back(inputs[i]);
          out.back().push_back(labels[i].back());
        }
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::vector<std::vector<int64_t>> sorted(std::vector<std::vector<int64_t>> samples) {
    std::sort(samples.begin(), samples.end());
    return samples;
  }
  static constexpr int64_t kSeqLen = 7;
  TempDir dir_;
  CountingByteTokenizer tok_;
  std::vector<std::string> documents_;
};

TEST_F(TorchTitanWindowsTest, FirstBatchesAreTorchTitansWindowsInOrder) {
  const auto expected = torchtitan_windows(documents_, kSeqLen);
  const DataLoader loader(tiny(dir_, dir_ / "corpus.jsonl", kSeqLen, 4), tok_);
  ASSERT_EQ(loader.num_samples(), static_cast<int64_t>(expected.size()));
  for (int64_t step = 0; step < 5; ++step) {
    const Batch batch = loader.get(step * 4, 0);
    const auto inputs = rows(batch.input);
    const auto labels = rows(batch.label);
    for (int64_t row = 0; row < 4; ++row) {
      const auto& window = expected[step * 4 + row];
      EXPECT_EQ(inputs[row], std::vector<int64_t>(window.begin(), window.end() - 1)) << step;
      EXPECT_EQ(labels[row], std::vector<int64_t>(window.begin() + 1, window.end())) << step;
    }
  }
}

// Three steps of global batch 4 on one rank, then a resume with global batch 6 on 2 ranks
// (3 each) and one with global batch 8 on 4 ranks, 2 microbatches: each continues with the
// next unseen windows of TorchTitan's stream.
TEST_F(TorchTitanWindowsTest, ResumeWithAnotherBatchOrDpDegreeTakesTheNextUnseenWindows) {
  const auto stream = torchtitan_windows(documents_, kSeqLen);
  ASSERT_GE(stream.size(), 26u);
  auto windows = [&](int64_t first, int64_t count) {
    return sorted({stream.begin() + first, stream.begin() + first + count});
  };
  for (int64_t step = 0; step < 3; ++step) {
    EXPECT_EQ(step_samples(4, 4, 1, step * 4), windows(step * 4, 4)) << step;
  }
  EXPECT_EQ(step_samples(3, 6, 2, 12), windows(12, 6));
  EXPECT_EQ(step_samples(1, 8, 4, 18), windows(18, 8));
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
  EXPECT_EQ(loader.num_samples(), total / 257);
  EXPECT_EQ(loader.accumulation_steps(), 2);
  ASSERT_EQ(loader.files().size(), 1u);
  EXPECT_EQ(loader.files()[0].bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(loader.files()[0].sha256, sha256_hex(text));
  EXPECT_NE(loader.describe().find("tinyshakespeare.txt"), std::string::npos);

  // Step 0, microbatch 1, rank 1, row 0 is ordinal 1*2*4 + 1*4 = 12: tokens [12*257, 13*257)
  // are bytes [12*257 - 1, 13*257 - 1) of the file (token 0 is BOS).
  const Batch batch = loader.get(0, 1);
  const auto input = rows(batch.input)[0];
  const auto label = rows(batch.label)[0];
  const std::string expected = text.substr(12 * 257 - 1, 257);
  for (int64_t j = 0; j < 256; ++j) {
    ASSERT_EQ(input[j], static_cast<unsigned char>(expected[j])) << j;
    ASSERT_EQ(label[j], static_cast<unsigned char>(expected[j + 1])) << j;
  }

  // The last sample ends at the EOS when the windows fit exactly; otherwise inside the text.
  const int64_t last = loader.num_samples() - 1;
  DataLoaderOptions single = tiny(dir, file, 256, 1);
  const DataLoader one(single, tok);
  const Batch tail = one.get(last, 0);
  const int64_t end = (last + 1) * 257 - 1;  // index of the last label token
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

}  // namespace unit_components_data_dataloader_test
}  // namespace titan::components::data
