// A block's parts are replaceable: the planner, tensor parallelism's checks and plan, and the
// FLOP count ask the parts, so a block whose feed-forward network is not SwiGLU is counted by
// what it holds, and a part without a tensor-parallel plan is refused by name.
#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "titan/config/resolve.h"
#include "titan/distributed/tensor_parallel.h"
#include "titan/errors.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/infra/tensor_parallel_plan.h"
#include "titan/models/common/linear.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"
#include "titan/tools/plan.h"

namespace titan::models {
namespace unit_models_common_transformer_block_test {

// A two-matrix ReLU MLP: out = w2(relu(w1 x)); saves the w1 output and the w2 input.
class ReluFeedForward : public FeedForwardPart {
 public:
  ReluFeedForward(int64_t dim, int64_t hidden, const torch::TensorOptions& options)
      : w1(register_module("w1", Linear(dim, hidden, options))),
        w2(register_module("w2", Linear(hidden, dim, options))),
        hidden_(hidden) {}
  torch::Tensor forward(const torch::Tensor& x) override { return w2(torch::relu(w1(x))); }
  std::vector<ShardedSize> tensor_parallel_sizes() const override {
    return {{"ReLU hidden width", hidden_}};
  }
  SavedElements saved_elements(bool) const override { return {0, 2 * hidden_}; }
  int64_t flops_per_token(int64_t) const override { return 6 * num_params(); }
  std::vector<ElementwiseOp*> recomputed_ops() override { return {}; }

  Linear w1{nullptr}, w2{nullptr};

 private:
  int64_t hidden_;
};

TransformerArgs args() {
  TransformerArgs a;
  a.dim = 32;
  a.n_layers = 2;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.vocab_size = 64;
  a.hidden_dim = 96;
  return a;
}

// Replaces layer 1's SwiGLU with a ReLU MLP of width `hidden`.
void replace_feed_forward(Transformer& model, int64_t hidden,
                          const torch::TensorOptions& options) {
  auto& block = *model.layers["1"]->as<TransformerBlockImpl>();
  auto relu = std::make_shared<ReluFeedForward>(args().dim, hidden, options);
  block.replace_module("feed_forward", relu);
  block.feed_forward = relu;
}

const auto kMeta = torch::TensorOptions().device(torch::kMeta);

TEST(TransformerBlock, SavedElementsAndFlopsComeFromTheParts) {
  Transformer dense(args(), kMeta);
  Transformer mixed(args(), kMeta);
  replace_feed_forward(mixed, 40, kMeta);
  auto* swiglu = dense.layers["1"]->as<TransformerBlockImpl>();
  auto* relu = mixed.layers["1"]->as<TransformerBlockImpl>();
  // SwiGLU keeps 4 x 96 between the projections, the ReLU MLP 2 x 40.
  EXPECT_EQ(swiglu->saved_elements(false).tensor - relu->saved_elements(false).tensor,
            4 * 96 - 2 * 40);
  EXPECT_EQ(swiglu->saved_elements(false).sequence, relu->saved_elements(false).sequence);
  EXPECT_EQ(swiglu->flops_per_token(64) - relu->flops_per_token(64),
            6 * (3 * 32 * 96 - 2 * 32 * 40));
  EXPECT_EQ(dense.flops_per_token(64) - mixed.flops_per_token(64),
            6 * (3 * 32 * 96 - 2 * 32 * 40));

  // The planner sums what each block says it saves (1 rank, no checkpointing, fp32).
  auto job = config::resolve(config::parse_command_line(
      {"--module", "llama3", "--config", "llama3_debugmodel", "--training.seq_len", "64",
       "--training.local_batch_size", "1", "--activation_checkpoint.mode", "none"}));
  auto dims = distributed::ParallelDims::from_config(job.parallelism, 1);
  const double dense_bytes = tools::plan_layout(dense, job, dims).memory.activations;
  const double mixed_bytes = tools::plan_layout(mixed, job, dims).memory.activations;
  EXPECT_DOUBLE_EQ(dense_bytes - mixed_bytes, (4 * 96 - 2 * 40) * 64 * 4.0);
}

TEST(TransformerBlock, TensorParallelChecksAskEveryPart) {
  Transformer odd(args(), kMeta);
  replace_feed_forward(odd, 41, kMeta);
  try {
    distributed::check_tensor_parallel(odd, 2, 64, true);
    FAIL() << "a ReLU width of 41 does not divide by 2";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ReLU hidden width (41)"), std::string::npos)
        << e.what();
  }
  Transformer even(args(), kMeta);
  replace_feed_forward(even, 42, kMeta);
  EXPECT_NO_THROW(distributed::check_tensor_parallel(even, 2, 64, true));
}

TEST(TransformerBlock, APartWithoutATensorParallelPlanIsRefusedByName) {
  testing::run_thread_ranks(2, [](int, distributed::World& world) {
    Transformer model(args());
    replace_feed_forward(model, 40, torch::TensorOptions());
    distributed::TensorParallel tp(world.global(), {});
    try {
      apply_tensor_parallel(model, tp);
      FAIL() << "no plan for a ReLU MLP";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("layers.1's"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ReluFeedForward"), std::string::npos) << e.what();
    }
  });
}

}  // namespace unit_models_common_transformer_block_test
}  // namespace titan::models
