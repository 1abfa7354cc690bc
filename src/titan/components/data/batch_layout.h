// Global sample indexing: which samples each (step, data-parallel rank, microbatch) trains on,
// so that a step's global batch is the same set of samples for every data-parallel degree and
// gradient-accumulation split (TorchTitan's global_batch_size semantics).
//
// With global batch G = local_batch_size b x dp_degree D x accumulation_steps A sequences per
// step, a step that starts after `consumed` samples of the run uses the global sample ordinals
// consumed + k for k in [0, G): microbatch m of dp rank r takes k in [m*D*b + r*b,
// m*D*b + r*b + b). The dataloader wraps ordinals modulo the number of samples. The trainer
// counts consumed samples (Megatron's consumed_samples) and checkpoints them, so a run resumed
// with another global batch, data-parallel degree or accumulation split continues with the next
// unseen sample.
#pragma once

#include <cstdint>

namespace titan::components::data {

class BatchLayout {
 public:
  /// `global_batch_size` -1 means b x D (no accumulation).
  /// Throws ConfigError naming training.local_batch_size / training.global_batch_size when b is
  /// not positive or G is not a positive multiple of b x D, and when dp_rank is outside
  /// [0, dp_degree).
  BatchLayout(int64_t local_batch_size, int64_t global_batch_size, int64_t dp_rank,
              int64_t dp_degree);

  int64_t local_batch_size() const { return local_batch_; }
  int64_t global_batch_size() const { return global_batch_; }
  int64_t accumulation_steps() const { return accumulation_; }
  int64_t dp_rank() const { return dp_rank_; }
  int64_t dp_degree() const { return dp_degree_; }

  /// Ordinal of row `row` of microbatch `microbatch` of this rank in the step that starts after
  /// `consumed` samples: consumed + microbatch*D*b + dp_rank*b + row. Throws std::out_of_range
  /// for a negative `consumed`, a microbatch outside [0, A) or a row outside [0, b).
  int64_t ordinal(int64_t consumed, int64_t microbatch, int64_t row) const;

 private:
  int64_t local_batch_;
  int64_t global_batch_;
  int64_t accumulation_;
  int64_t dp_rank_;
  int64_t dp_degree_;
};

}  // namespace titan::components::data
