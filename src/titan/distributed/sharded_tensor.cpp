#include "titan/distributed/sharded_tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "titan/errors.h"

namespace titan::distributed {

int64_t global_rows(const std::vector<int64_t>& global_shape) {
  return global_shape.empty() ? 1 : global_shape[0];
}

int64_t row_numel(const std::vector<int64_t>& global_shape) {
  int64_t n = 1;
  for (size_t d = 1; d < global_shape.size(); ++d) n *= global_shape[d];
  return n;
}

int64_t local_rows(const ShardedTensor& piece) {
  return piece.global_shape.empty() ? 1 : piece.local.size(0);
}

ShardedTensor whole(const torch::Tensor& t) { return ShardedTensor{t, t.sizes().vec(), 0, true}; }

void check_piece(const std::string& name, const ShardedTensor& piece) {
  if (!piece.local.defined()) {
    throw CheckpointError(fmt::format("tensor '{}': its local piece is undefined", name));
  }
  const auto& g = piece.global_shape;
  const auto local = piece.local.sizes();
  bool fits = false;
  if (g.empty()) {
    fits = piece.local.numel() == 1 && piece.row_offset == 0;
  } else if (static_cast<int64_t>(g.size()) == piece.local.dim()) {
    fits = std::equal(g.begin() + 1, g.end(), local.begin() + 1) && piece.row_offset >= 0 &&
           piece.row_offset + local[0] <= g[0];
  }
  if (!fits) {
    throw CheckpointError(
        fmt::format("tensor '{}': local piece of shape [{}] at row_offset {} "
                    "does not fit the global shape [{}] (a piece holds rows "
                    "[row_offset, row_offset + rows) of dim 0 and every other "
                    "dim whole)",
                    name, fmt::join(local, ", "), piece.row_offset, fmt::join(g, ", ")));
  }
}

}  // namespace titan::distributed
