#include "titan/components/data/dataloader.h"

#include <fmt/format.h>

#include "titan/components/data/dataset.h"
#include "titan/errors.h"

namespace titan::components::data {
namespace {

int64_t checked_seq_len(int64_t seq_len) {
  if (seq_len <= 0) {
    throw ConfigError(fmt::format("training.seq_len must be positive, got {}", seq_len));
  }
  return seq_len;
}

TokenCacheOptions cache_options(const DataLoaderOptions& options) {
  TokenCacheOptions out;
  out.cache_dir = options.cache_dir;
  out.skip_bad = options.skip_bad_documents;
  out.build = options.build_cache;
  out.wait_timeout_s = options.cache_wait_timeout_s;
  return out;
}

}  // namespace

DataLoaderOptions data_loader_options(const config::JobConfig& job, int64_t dp_rank,
                                      int64_t dp_degree, int64_t local_rank) {
  DataLoaderOptions options;
  options.dataset = job.training.dataset;
  options.dataset_path = job.training.dataset_path;
  options.seq_len = job.training.seq_len;
  options.local_batch_size = job.training.local_batch_size;
  options.global_batch_size = job.training.global_batch_size;
  options.dp_rank = dp_rank;
  options.dp_degree = dp_degree;
  options.skip_bad_documents = job.training.skip_bad_documents;
  options.build_cache = local_rank == 0;
  return options;
}

DataLoader::DataLoader(const DataLoaderOptions& options, const Tokenizer& tokenizer)
    : seq_len_(checked_seq_len(options.seq_len)),
      layout_(options.local_batch_size, options.global_batch_size, options.dp_rank,
              options.dp_degree),
      cache_([&] {  // label_ is constructed already: it is declared first
        const DatasetSource source = resolve_dataset(options.dataset, options.dataset_path);
        label_ = source.label;
        return TokenCache(source, tokenizer, cache_options(options));
      }()),
      num_samples_(cache_.num_tokens() / (seq_len_ + 1)) {
  if (num_samples_ < 1) {
    throw DataError(fmt::format(
        "dataset '{}' has {} tokens; one sample of training.seq_len {} needs {}", label_,
        cache_.num_tokens(), seq_len_, seq_len_ + 1));
  }
}

Batch DataLoader::get(int64_t consumed, int64_t microbatch) const {
  const int64_t b = layout_.local_batch_size();
  const int64_t s = seq_len_;
  Batch batch{torch::empty({b, s}, torch::kInt64), torch::empty({b, s}, torch::kInt64)};
  int64_t* input = batch.input.data_ptr<int64_t>();  // [b, s]
  int64_t* label = batch.label.data_ptr<int64_t>();  // [b, s]
  const int32_t* tokens = cache_.tokens();
  for (int64_t row = 0; row < b; ++row) {
    const int64_t sample = layout_.ordinal(consumed, microbatch, row) % num_samples_;
    const int32_t* x = tokens + sample * (s + 1);  // the window x[0 .. s]
    int64_t* in = input + row * s;
    int64_t* out = label + row * s;
    for (int64_t j = 0; j < s; ++j) {
      in[j] = x[j];
      out[j] = x[j + 1];
    }
  }
  return batch;
}

int64_t DataLoader::epoch(int64_t consumed) const { return consumed / num_samples_; }

std::string DataLoader::describe() const {
  const DataStats& st = stats();
  return fmt::format(
      "dataset {}: {} documents in {} file(s), {} bad skipped, {} tokens -> {} samples of "
      "seq_len {}; global batch {} = local {} x dp {} x {} accumulation; token cache {} ({})",
      label_, st.documents, files().size(), st.skipped, st.tokens, num_samples_, seq_len_,
      layout_.global_batch_size(), layout_.local_batch_size(), layout_.dp_degree(),
      accumulation_steps(), st.cache_path,
      st.built ? fmt::format("built in {:.1f} s", st.build_seconds) : std::string("reused"));
}

}  // namespace titan::components::data
