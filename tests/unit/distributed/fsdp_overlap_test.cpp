// FSDP's compile-mode overlap (FsdpOptions::overlap) against eager FSDP on thread ranks. The
// prefetched all-gathers and the asynchronous gradient reductions are eager's collectives in
// eager's order, so every shard gradient must equal eager's bit for bit: two microbatches
// accumulated, with and without resharding after forward, under FSDP 2 and HSDP 2 x 2. While a
// block computes, the next block's all-gather is in flight.
#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "titan/distributed/fsdp.h"
#include "titan/models/common/transformer.h"

namespace titan {
namespace unit_distributed_fsdp_overlap_test {

using distributed::World;

struct Layout {
  int shards = 2, replicas = 1;
  bool reshard = true;
};

struct Run {
  std::vector<torch::Tensor> grads;  // every shard's gradient, in Fsdp::parameters() order
  int prefetched_blocks = 0;         // blocks whose all-gather was in flight before they ran
};

// Rank `rank`'s shard gradients after two microbatches of forward and backward.
Run train_grads(int rank, World& world, Layout layout, bool overlap) {
  models::TransformerArgs a;
  a.dim = 32;
  a.n_layers = 3;
  a.n_heads = 4;
  a.vocab_size = 64;
  models::Transformer model(a);
  model.init_weights(1);
  const int base = rank / layout.shards * layout.shards, column = rank % layout.shards;
  std::vector<int> shard_ranks, replica_ranks;
  for (int i = 0; i < layout.shards; ++i) shard_ranks.push_back(base + i);
  for (int i = 0; i < layout.replicas; ++i) replica_ranks.push_back(column + i * layout.shards);
  auto shard_group = world.new_group(shard_ranks, "dp_shard");
  auto replicate_group = world.new_group(replica_ranks, "dp_replicate");
  Run run;
  std::vector<std::shared_ptr<distributed::FsdpUnit>> layer_units;
  // Added before FSDP, so it runs inside FSDP's gather of the block.
  model.add_block_wrapper([&](int64_t layer, const torch::Tensor& x,
                              const models::CausalLM::TensorFn& inner) {
    if (layer + 1 < a.n_layers && layer_units.at(layer + 1)->prefetching()) {
      ++run.prefetched_blocks;
    }
    return inner(x);
  });
  distributed::FsdpOptions options;
  options.reshard_after_forward = layout.reshard;
  options.overlap = overlap;
  auto fsdp = distributed::Fsdp::apply(model, shard_group, replicate_group, options);
  layer_units = fsdp->units();
  for (int micro = 0; micro < 2; ++micro) {
    auto input = (torch::arange(8, torch::kLong) * (rank + 3) + 5 * micro).remainder(64);
    auto logits = model.forward(input.view({1, 8}));  // [1, 8, 64]
    (logits.square().sum() * 0.01).backward();
  }
  fsdp->finish_gradients();
  for (const auto& p : fsdp->parameters()) {
    EXPECT_TRUE(p.grad().defined());
    run.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  return run;
}

void expect_overlap_matches_eager(Layout layout) {
  testing::run_thread_ranks(layout.shards * layout.replicas, [&](int rank, World& world) {
    auto eager = train_grads(rank, world, layout, false);
    auto overlap = train_grads(rank, world, layout, true);
    ASSERT_EQ(eager.grads.size(), overlap.grads.size());
    for (size_t i = 0; i < eager.grads.size(); ++i) {
      EXPECT_TRUE(torch::equal(eager.grads[i], overlap.grads[i])) << "rank " << rank << " #" << i;
    }
    EXPECT_EQ(eager.prefetched_blocks, 0);
    EXPECT_EQ(overlap.prefetched_blocks, 2 * 2);  // blocks 0 and 1 of each microbatch
  });
}

TEST(FsdpOverlap, Fsdp2GradientsAreEagersBitForBit) { expect_overlap_matches_eager({2, 1, true}); }

TEST(FsdpOverlap, WithoutReshardingGradientsAreEagersBitForBit) {
  expect_overlap_matches_eager({2, 1, false});
}

TEST(FsdpOverlap, Hsdp2x2GradientsAreEagersBitForBit) {
  expect_overlap_matches_eager({2, 2, true});
}

}  // namespace unit_distributed_fsdp_overlap_test
}  // namespace titan
