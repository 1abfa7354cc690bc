// The training dataloader: a dataset's token stream (token_cache.h) packed into fixed-length
// samples as TorchTitan does, and handed out by global sample index (batch_layout.h).
//
// Packing: documents are concatenated ([BOS] text [EOS] each) into one stream of T tokens, cut
// into N = T / (seq_len + 1) disjoint windows of seq_len + 1 tokens; sample i is
// x = tokens[i*(seq_len + 1), (i + 1)*(seq_len + 1)), input = x[:-1], label = x[1:], so the
// last token of a window is only a label. These are TorchTitan 0.2.2's windows (its
// HuggingFaceTextDataset keeps a token buffer and takes seq_len + 1 tokens off it at a time;
// the Neuron fork's too). Windows cross document boundaries; the tail that does not fill a
// window is unused. Ordinal o reads sample o mod N: when the data runs out it starts over from
// sample 0, and epoch(step) counts the passes.
//
// No hidden state: a batch is a pure function of (samples consumed before its step,
// microbatch) and the layout, so resuming needs nothing but the consumed-sample count.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "titan/components/data/batch_layout.h"
#include "titan/components/data/token_cache.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/config/job_config.h"

namespace titan::components::data {

struct DataLoaderOptions {
  std::string dataset = "kjv_bible";  // training.dataset: a registered name (dataset.h)
  std::string dataset_path;           // training.dataset_path: file or folder; wins when set
  int64_t seq_len = 2048;             // training.seq_len, tokens per sample
  int64_t local_batch_size = 8;       // training.local_batch_size, samples per microbatch
  int64_t global_batch_size = -1;     // training.global_batch_size; -1: local x dp_degree
  int64_t dp_rank = 0;                // this rank's data-parallel coordinate
  int64_t dp_degree = 1;              // data-parallel degree (replicate x shard)
  std::filesystem::path cache_dir;    // token cache folder; empty: default_token_cache_dir()
  bool skip_bad_documents = false;    // training.skip_bad_documents
  bool build_cache = true;            // false: wait for local rank 0 to build the token cache
  double cache_wait_timeout_s = 3600.0;
};

/// Options from the job config's training section for the rank at data-parallel coordinate
/// `dp_rank` of `dp_degree`, whose local rank is `local_rank` (local rank 0 builds the cache).
DataLoaderOptions data_loader_options(const config::JobConfig& job, int64_t dp_rank,
                                      int64_t dp_degree, int64_t local_rank);

/// One microbatch. input, label: [local_batch_size, seq_len] int64 on the CPU, label[b, s] =
/// the token after input[b, s].
struct Batch {
  torch::Tensor input;
  torch::Tensor label;
};

class DataLoader {
 public:
  /// Resolves the dataset (dataset.h) and opens its token cache (token_cache.h) under
  /// `tokenizer`, which is used only here. Throws ConfigError for an invalid seq_len or batch
  /// layout or an unknown dataset name, DataError for bad data or fewer than seq_len + 1 tokens.
  DataLoader(const DataLoaderOptions& options, const Tokenizer& tokenizer);

  /// Microbatch `microbatch` in [0, accumulation_steps()) for this rank of the step that
  /// starts after `consumed` >= 0 samples of the run (step t of a run that never changed its
  /// global batch G: consumed = t x G). Allocates the two tensors and copies from the
  /// memory-mapped cache. Thread-safe. Throws std::out_of_range for a negative `consumed` or a
  /// microbatch out of range.
  Batch get(int64_t consumed, int64_t microbatch) const;

  /// Microbatches per step: global_batch_size / (local_batch_size x dp_degree).
  int64_t accumulation_steps() const { return layout_.accumulation_steps(); }
  /// N, the number of seq_len + 1 windows in the dataset.
  int64_t num_samples() const { return num_samples_; }
  int64_t seq_len() const { return seq_len_; }
  const BatchLayout& layout() const { return layout_; }
  /// 0-based pass over the data that the sample after `consumed` ones is in: consumed / N. A
  /// step whose epoch is above the previous step's has started over from sample 0.
  int64_t epoch(int64_t consumed) const;

  const DataStats& stats() const { return cache_.stats(); }
  /// The dataset files with sizes and SHA-256 hashes, for the run manifest.
  const std::vector<DatasetFile>& files() const { return cache_.files(); }
  /// One line for the log: dataset, documents, skipped, tokens, samples, batch layout, cache.
  std::string describe() const;

 private:
  std::string label_;
  int64_t seq_len_;
  BatchLayout layout_;
  TokenCache cache_;
  int64_t num_samples_;
};

}  // namespace titan::components::data
