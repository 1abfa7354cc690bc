// FSDP on one rank: a block computes with its parameters gathered in
// training.mixed_precision_param (bf16 seen inside the block's forward), while the registered
// parameters (what the optimizer updates) and their gradients stay fp32; and a block's gathered
// parameters are freed once its backward is done (FSDP2's reshard after backward), resharded
// after forward or not, not when the whole backward ends. Without a cast, one rank computes on
// the parameters themselves (no gathered copy) and gets plain training's gradients.
#include <gtest/gtest.h>

#include "support/sharded_state.h"
#include "titan/distributed/fsdp.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/transformer_block.h"

namespace titan {
namespace unit_distributed_fsdp_test {

models::TransformerArgs small_args() {
  models::TransformerArgs a;
  a.dim = 32;
  a.n_layers = 2;
  a.n_heads = 4;
  a.vocab_size = 64;
  return a;
}

// The dtype of block 0's wq while the block runs, under FSDP gathering in `param_dtype`.
torch::ScalarType gathered_dtype(torch::ScalarType param_dtype) {
  models::Transformer model(small_args());
  model.init_weights(1);
  auto* wq = model.blocks().front().module->attention->as<models::AttentionImpl>()->wq.get();
  torch::ScalarType seen = torch::kDouble;
  // Added before FSDP, so it runs inside FSDP's gather.
  model.add_block_wrapper([&](int64_t layer, const torch::Tensor& x,
                              const models::CausalLM::TensorFn& inner) {
    if (layer == 0) seen = wq->weight.scalar_type();
    return inner(x);
  });
  distributed::FsdpOptions options;
  options.param_dtype = param_dtype;
  auto fsdp = distributed::Fsdp::apply(model, testing::group_of_one(), testing::group_of_one(),
                                       options);
  auto logits = model.forward(torch::tensor({{1, 2, 3, 4}}, torch::kLong));  // [1, 4, 64]
  logits.to(torch::kFloat).sum().backward();
  for (const auto& p : fsdp->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
    EXPECT_TRUE(p.grad().defined());
    if (!p.grad().defined()) continue;
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(wq->weight.scalar_type(), torch::kFloat);  // the shard is back after the forward
  return seen;
}

TEST(Fsdp, BlocksComputeInTheParamDtype) {
  EXPECT_EQ(gathered_dtype(torch::kBFloat16), torch::kBFloat16);
  EXPECT_EQ(gathered_dtype(torch::kFloat), torch::kFloat);
}

// On one rank without a cast FSDP copies nothing: a block computes on the registered parameters
// themselves, and their gradients are plain training's, bit for bit.
TEST(Fsdp, OnOneRankBlocksComputeOnTheParametersThemselves) {
  models::Transformer plain(small_args()), sharded(small_args());
  plain.init_weights(1);
  sharded.init_weights(1);
  auto* wq = sharded.blocks().front().module->attention->as<models::AttentionImpl>()->wq.get();
  const void* seen = nullptr;
  std::string seen_grad_fn;
  sharded.add_block_wrapper([&](int64_t layer, const torch::Tensor& x,
                                const models::CausalLM::TensorFn& inner) {
    if (layer == 0) {
      seen = wq->weight.data_ptr();
      seen_grad_fn = wq->weight.grad_fn() ? wq->weight.grad_fn()->name() : "";
    }
    return inner(x);
  });
  auto fsdp = distributed::Fsdp::apply(sharded, testing::group_of_one(), testing::group_of_one(),
                                       {});
  const void* registered = wq->weight.data_ptr();  // the shard FSDP registered
  const auto tokens = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
  plain.forward(tokens).sum().backward();
  sharded.forward(tokens).sum().backward();
  EXPECT_EQ(seen, registered);
  // Straight from the gather, no slice whose backward would copy the gradient.
  EXPECT_NE(seen_grad_fn.find("AllGatherFn"), std::string::npos) << seen_grad_fn;
  auto want = plain.named_parameters();
  for (const auto& item : sharded.named_parameters()) {
    // Backward freed nothing of the parameters themselves.
    EXPECT_TRUE(torch::equal(item.value(), want[item.key()])) << item.key();
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_TRUE(torch::equal(item.value().grad(), want[item.key()].grad())) << item.key();
  }
}

// Bytes block 1's gathered parameters hold when backward reaches block 0's input; gathered in
// bf16, so that they are a copy even on one rank.
int64_t block1_gathered_bytes_in_block0_backward(bool reshard_after_forward) {
  models::Transformer model(small_args());
  model.init_weights(1);
  auto* wq = model.blocks()[1].module->attention->as<models::AttentionImpl>()->wq.get();
  torch::Tensor block1_weight;  // a view of block 1's gathered wq
  int64_t bytes = -1;
  model.add_block_wrapper([&](int64_t layer, const torch::Tensor& x,
                              const models::CausalLM::TensorFn& inner) {
    if (layer == 1) block1_weight = wq->weight;
    if (layer == 0) {
      x.register_hook([&](const torch::Tensor& grad) {
        bytes = static_cast<int64_t>(block1_weight.storage().nbytes());
        return grad;
      });
    }
    return inner(x);
  });
  distributed::FsdpOptions options;
  options.param_dtype = torch::kBFloat16;
  options.reshard_after_forward = reshard_after_forward;
  auto fsdp = distributed::Fsdp::apply(model, testing::group_of_one(), testing::group_of_one(),
                                       options);
  model.forward(torch::tensor({{1, 2, 3, 4}}, torch::kLong)).to(torch::kFloat).sum().backward();
  EXPECT_TRUE(fsdp->parameters().front().grad().defined());
  return bytes;
}

TEST(Fsdp, FreesABlocksGatheredParametersAfterItsBackward) {
  EXPECT_EQ(block1_gathered_bytes_in_block0_backward(true), 0);
  EXPECT_EQ(block1_gathered_bytes_in_block0_backward(false), 0);
}

}  // namespace unit_distributed_fsdp_test
}  // namespace titan
