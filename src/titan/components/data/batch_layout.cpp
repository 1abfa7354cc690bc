#include "titan/components/data/batch_layout.h"

#include <fmt/format.h>

#include <stdexcept>

#include "titan/errors.h"

namespace titan::components::data {

BatchLayout::BatchLayout(int64_t local_batch_size, int64_t global_batch_size, int64_t dp_rank,
                         int64_t dp_degree)
    : local_batch_(local_batch_size), dp_rank_(dp_rank), dp_degree_(dp_degree) {
  if (local_batch_size <= 0) {
    throw ConfigError(fmt::format("training.local_batch_size must be positive, got {}",
                                  local_batch_size));
  }
  if (dp_degree <= 0 || dp_rank < 0 || dp_rank >= dp_degree) {
    throw ConfigError(fmt::format("data-parallel rank {} is outside [0, {})", dp_rank, dp_degree));
  }
  const int64_t per_microbatch = local_batch_size * dp_degree;
  global_batch_ = global_batch_size == -1 ? per_microbatch : global_batch_size;
  if (global_batch_ <= 0 || global_batch_ % per_microbatch != 0) {
    throw ConfigError(fmt::format(
        "training.global_batch_size {} must be -1 or a positive multiple of "
        "training.local_batch_size x data-parallel degree = {} x {} = {}",
        global_batch_size, local_batch_size, dp_degree, per_microbatch));
  }
  accumulation_ = global_batch_ / per_microbatch;
}

int64_t BatchLayout::ordinal(int64_t consumed, int64_t microbatch, int64_t row) const {
  if (consumed < 0 || microbatch < 0 || microbatch >= accumulation_ || row < 0 ||
      row >= local_batch_) {
    throw std::out_of_range(fmt::format(
        "BatchLayout::ordinal(consumed {}, microbatch {}, row {}): need consumed >= 0, "
        "microbatch in [0, {}), row in [0, {})",
        consumed, microbatch, row, accumulation_, local_batch_));
  }
  return consumed + microbatch * dp_degree_ * local_batch_ + dp_rank_ * local_batch_ + row;
}

}  // namespace titan::components::data
