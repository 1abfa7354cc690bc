// The model pieces' backward markers (models/common/block_trace.h): while tracing, a piece's
// backward allocations count under its activation-gradient tag, the thread's tag comes back
// after its backward, also when the pass stops short of the piece's input (gradients for the
// weights only, as a pipeline's weight pass asks), and nothing is added while tracing is off.
#include <gtest/gtest.h>

#include "titan/models/common/block_trace.h"

namespace titan::models {
namespace unit_models_common_block_trace_test {

using platform::MemoryCategory;

// A piece `layer` computing x * w, with a hook that sees the tag in its backward.
struct Piece {
  torch::Tensor x = torch::randn({4, 4}, torch::requires_grad());
  torch::Tensor w = torch::randn({4, 4}, torch::requires_grad());
  platform::MemoryTag seen;

  torch::Tensor run(int64_t layer) {
    return with_traced_backward({layer}, x, [this](const torch::Tensor& in) {
      auto y = in * w;
      y.register_hook([this](const torch::Tensor& g) {
        seen = platform::current_memory_tag();
        return g;
      });
      return y;
    });
  }
};

TEST(BlockTrace, BackwardCountsUnderThePiecesTagAndRestoresTheThreads) {
  set_tracing(true);
  Piece piece;
  piece.run(3).sum().backward();
  EXPECT_EQ(piece.seen.category, MemoryCategory::ActivationGradients);
  EXPECT_EQ(piece.seen.block, 3);
  EXPECT_EQ(platform::current_memory_tag().category, MemoryCategory::Other);
  // Gradients for the weight only: the node on the piece's input never runs.
  Piece weights;
  auto y = weights.run(5).sum();
  torch::autograd::backward({y}, {}, /*retain_graph=*/false, /*create_graph=*/false, {weights.w});
  EXPECT_EQ(weights.seen.block, 5);
  EXPECT_FALSE(weights.x.grad().defined());
  EXPECT_EQ(platform::current_memory_tag().category, MemoryCategory::Other);
  EXPECT_EQ(platform::current_memory_tag().block, -1);
  set_tracing(false);
}

TEST(BlockTrace, TracingOffAddsNoNode) {
  Piece piece;
  auto y = piece.run(1);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
  y.sum().backward();
  EXPECT_EQ(piece.seen.category, MemoryCategory::Other);
}

}  // namespace unit_models_common_block_trace_test
}  // namespace titan::models
