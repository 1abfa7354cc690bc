// Auxiliary-loss-free load balancing: on 4 thread ranks (dp_shard 2 x tp 2) the counts of every
// rank are summed before the bias update, the update is TorchTitan's formula computed here by
// hand, every rank ends with the same bias, and the checkpoint pieces round-trip; activation
// checkpointing's recompute does not count tokens again.
#include "titan/components/load_balancing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/thread_ranks.h"
#include "titan/config/job_config.h"
#include "titan/distributed/activation_checkpoint.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"

namespace titan::components {
namespace unit_components_load_balancing_test {

models::TransformerArgs small_moe(double coeff) {
  models::TransformerArgs a;
  a.dim = 16;
  a.n_layers = 3;
  a.n_heads = 2;
  a.vocab_size = 32;
  a.hidden_dim = 24;
  a.n_dense_layers = 1;  // layer 0 dense, layers 1 and 2 MoE
  models::MoEArgs m;
  m.num_experts = 4;
  m.hidden_dim = 8;
  m.top_k = 2;
  m.load_balance_coeff = coeff;
  a.moe = m;
  return a;
}

models::MoEImpl& moe_of(models::Transformer& model, int64_t layer) {
  return *model.layers[std::to_string(layer)]
              ->as<models::TransformerBlockImpl>()
              ->feed_forward->as<models::MoEImpl>();
}

TEST(ExpertLoadBalancer, SumsCountsOverRanksAndMovesEveryRanksBiasAlike) {
  config::ParallelismSection p;
  p.tensor_parallel_degree = 2;
  const auto dims = distributed::ParallelDims::from_config(p, 4);  // dp_shard 2 x tp 2
  std::vector<std::vector<float>> biases(4);
  testing::run_thread_ranks(4, [&](int r, distributed::World& world) {
    const auto mesh = distributed::DeviceMesh::build(dims, world);
    models::Transformer model(small_moe(1e-3));
    ExpertLoadBalancer balancer({&model}, mesh);
    ASSERT_TRUE(balancer.active());
    // Rank r routed (r + 1) x [6, 1, 0, 1] tokens in layer 1 and [2, 2, 2, 2] in layer 2: the
    // sums are 10 x [6, 1, 0, 1] (mean 20) and [20, 20, 20, 20].
    moe_of(model, 1).tokens_per_expert = torch::tensor({6.f, 1.f, 0.f, 1.f}) * float(r + 1);
    moe_of(model, 2).tokens_per_expert = torch::full({4}, 2.f) * float(r + 1);
    balancer.step();
    // sign(20 - [60, 10, 0, 10]) = [-1, 1, 1, 1], minus its mean 0.5: [-1.5, 0.5, 0.5, 0.5].
    auto want = torch::tensor({-1.5f, 0.5f, 0.5f, 0.5f}) * 1e-3f;
    EXPECT_TRUE(torch::allclose(moe_of(model, 1).expert_bias, want, 0, 1e-9));
    EXPECT_EQ(moe_of(model, 2).expert_bias.abs().max().item<float>(), 0.f);  // balanced
    EXPECT_EQ(moe_of(model, 1).tokens_per_expert.abs().max().item<float>(), 0.f);
    ASSERT_EQ(balancer.loads().size(), 2u);
    EXPECT_EQ(balancer.loads()[0].layer, 1);
    EXPECT_DOUBLE_EQ(balancer.loads()[0].max, 3.0);
    EXPECT_DOUBLE_EQ(balancer.loads()[0].min, 0.0);
    EXPECT_DOUBLE_EQ(balancer.loads()[1].max, 1.0);
    auto b = moe_of(model, 1).expert_bias.contiguous();
    biases[r] = {b.data_ptr<float>(), b.data_ptr<float>() + 4};

    // Saved once (the first rank of dp x tp), loaded by every rank.
    const auto saved = balancer.state(false);
    ASSERT_EQ(saved.count("layers.1.moe.expert_bias"), 1u);
    EXPECT_EQ(saved.at("layers.1.moe.expert_bias").writer, r == 0);
    models::Transformer fresh(small_moe(1e-3));
    ExpertLoadBalancer restored({&fresh}, mesh);
    auto loading = restored.state(true);
    for (auto& [name, piece] : loading) piece.local.copy_(saved.at(name).local);
    restored.finish_load();
    EXPECT_TRUE(torch::equal(moe_of(fresh, 1).expert_bias, moe_of(model, 1).expert_bias));
  });
  for (int r = 1; r < 4; ++r) EXPECT_EQ(biases[r], biases[0]) << "rank " << r;
}

TEST(ExpertLoadBalancer, ZeroCoefficientLogsLoadsWithoutABias) {
  config::ParallelismSection p;
  const auto dims = distributed::ParallelDims::from_config(p, 1);
  testing::run_thread_ranks(1, [&](int, distributed::World& world) {
    const auto mesh = distributed::DeviceMesh::build(dims, world);
    models::Transformer model(small_moe(0.0));
    EXPECT_FALSE(moe_of(model, 1).expert_bias.defined());
    ExpertLoadBalancer balancer({&model}, mesh);
    moe_of(model, 1).tokens_per_expert = torch::tensor({4.f, 0.f, 2.f, 2.f});
    balancer.step();
    EXPECT_DOUBLE_EQ(balancer.loads()[0].max, 2.0);
    EXPECT_TRUE(balancer.state(false).empty());
  });
}

// A skipped step (training.on_nonfinite = "skip") drops its counts: the next step() balances
// on the following step's tokens only, and the biases and loads stay the last step()'s.
TEST(ExpertLoadBalancer, ADiscardedStepDropsItsCountsAndKeepsBiasesAndLoads) {
  config::ParallelismSection p;
  const auto dims = distributed::ParallelDims::from_config(p, 1);
  testing::run_thread_ranks(1, [&](int, distributed::World& world) {
    const auto mesh = distributed::DeviceMesh::build(dims, world);
    models::Transformer model(small_moe(1e-3));
    ExpertLoadBalancer balancer({&model}, mesh);
    moe_of(model, 1).tokens_per_expert = torch::tensor({6.f, 1.f, 0.f, 1.f});
    balancer.step();
    const auto bias = moe_of(model, 1).expert_bias.clone();
    const double max_load = balancer.loads()[0].max;
    moe_of(model, 1).tokens_per_expert.copy_(torch::tensor({0.f, 0.f, 9.f, 0.f}));
    balancer.discard();
    EXPECT_EQ(moe_of(model, 1).tokens_per_expert.abs().max().item<float>(), 0.f);
    EXPECT_TRUE(torch::equal(moe_of(model, 1).expert_bias, bias));
    EXPECT_DOUBLE_EQ(balancer.loads()[0].max, max_load);
    // The next step sees only its own [2, 2, 2, 2]: balanced, so the bias does not move.
    moe_of(model, 1).tokens_per_expert.add_(2.f);
    balancer.step();
    EXPECT_TRUE(torch::equal(moe_of(model, 1).expert_bias, bias));
    EXPECT_DOUBLE_EQ(balancer.loads()[0].max, 1.0);
  });
}

TEST(ExpertLoadBalancer, ActivationCheckpointingDoesNotCountTokensTwice) {
  auto counts_after_step = [](const std::string& mode) {
    torch::manual_seed(0);
    models::Transformer model(small_moe(1e-3));
    model.init_weights(3);
    config::ActivationCheckpointSection ac;
    ac.mode = mode;
    distributed::apply_activation_checkpointing(model, ac);
    auto tokens = torch::randint(0, 32, {2, 5}, torch::kInt64);
    model.forward(tokens).sum().backward();
    return moe_of(model, 2).tokens_per_expert.clone();
  };
  const auto plain = counts_after_step("none");
  EXPECT_EQ(plain.sum().item<float>(), 2 * 5 * 2);
  EXPECT_TRUE(torch::equal(counts_after_step("full"), plain));
}

}  // namespace unit_components_load_balancing_test
}  // namespace titan::components
