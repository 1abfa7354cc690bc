// Context-parallel attention on 2 and 4 thread ranks, both rotate methods and both balancers,
// against dense float64 attention over the whole sequence: each rank's output rows and the
// gradients of its queries, keys and values (every rank's queries contribute to every rank's
// keys) to 1e-12; plus the split of a sequence and its positions.
#include "titan/distributed/context_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "support/dense_attention.h"
#include "support/thread_ranks.h"
#include "titan/errors.h"
#include "titan/platform/device.h"

namespace titan {
namespace unit_distributed_context_parallel_test {

using distributed::ContextParallel;
using distributed::LoadBalancer;
using distributed::RotateMethod;
using distributed::SequenceSplit;

// x [B, heads, S, D] -> rank's chunks along the sequence, as the model's [B, S, ...] tensors.
torch::Tensor shard_heads(const torch::Tensor& x, const SequenceSplit& split, int rank) {
  return split.shard(x.transpose(1, 2), rank).transpose(1, 2).contiguous();
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

void check_against_dense(int cp, LoadBalancer balancer, RotateMethod rotate, int64_t chunk_len) {
  const SequenceSplit split{cp, balancer};
  torch::manual_seed(21);
  const int64_t B = 2, H = 4, Hkv = 2, S = split.num_chunks() * chunk_len, Dh = 8, Dv = 6;
  const double scale = 1.0 / std::sqrt(double(Dh));
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto q = torch::randn({B, H, S, Dh}, opts).requires_grad_();
  auto k = torch::randn({B, Hkv, S, Dh}, opts).requires_grad_();
  auto v = torch::randn({B, Hkv, S, Dv}, opts).requires_grad_();
  auto upstream = torch::randn({B, H, S, Dv}, opts);
  auto want = testing::dense_attention(q, k, v, scale);
  auto grads = torch::autograd::grad({want}, {q, k, v}, {upstream});
  testing::run_thread_ranks(cp, [&](int rank, distributed::World& world) {
    ContextParallel context(world.global(), balancer, rotate);
    auto ql = shard_heads(q.detach(), split, rank).requires_grad_();
    auto kl = shard_heads(k.detach(), split, rank).requires_grad_();
    auto vl = shard_heads(v.detach(), split, rank).requires_grad_();
    auto out = context.attention(ql, kl, vl, scale);  // [B, H, S / cp, Dv]
    out.backward(shard_heads(upstream, split, rank));
    const std::string at =
        "chunks of " + std::to_string(chunk_len) + ", rank " + std::to_string(rank);
    EXPECT_LE(max_diff(out, shard_heads(want.detach(), split, rank)), 1e-12) << at;
    EXPECT_LE(max_diff(ql.grad(), shard_heads(grads[0], split, rank)), 1e-12) << at << " dq";
    EXPECT_LE(max_diff(kl.grad(), shard_heads(grads[1], split, rank)), 1e-12) << at << " dk";
    EXPECT_LE(max_diff(vl.grad(), shard_heads(grads[2], split, rank)), 1e-12) << at << " dv";
  });
}

using Params = std::tuple<int, LoadBalancer, RotateMethod>;
class ContextParallelAttention : public ::testing::TestWithParam<Params> {};

// Chunks of 3 tokens and of 37 (past the fused kernel's blocks, so a chunk's diagonal pair
// spans several of them).
TEST_P(ContextParallelAttention, MatchesDenseAttentionOnEveryRank) {
  const auto [cp, balancer, rotate] = GetParam();
  for (int64_t len : {3, 37}) check_against_dense(cp, balancer, rotate, len);
}

INSTANTIATE_TEST_SUITE_P(
    DegreesBalancersAndRotations, ContextParallelAttention,
    ::testing::Combine(::testing::Values(2, 4),
                       ::testing::Values(LoadBalancer::HeadTail, LoadBalancer::None),
                       ::testing::Values(RotateMethod::AllGather, RotateMethod::AllToAll)));

TEST(SequenceSplit, HeadTailGivesEveryRankAHeadAndATailChunk) {
  const SequenceSplit split{4, LoadBalancer::HeadTail};
  EXPECT_EQ(split.num_chunks(), 8);
  EXPECT_EQ(split.chunks_of(1), (std::vector<int64_t>{1, 6}));
  auto tokens = torch::arange(16, torch::kInt64).view({1, 16});
  EXPECT_TRUE(torch::equal(split.shard(tokens, 1), torch::tensor({{2, 3, 12, 13}})));
  EXPECT_THROW(split.shard(torch::zeros({1, 12}), 0), c10::Error);  // 12 tokens, 8 chunks
  const SequenceSplit plain{4, LoadBalancer::None};
  EXPECT_TRUE(torch::equal(plain.shard(tokens, 3), torch::tensor({{12, 13, 14, 15}})));
}

TEST(SequenceSplit, StartCheckNamesTheSequenceLength) {
  if (platform::visible_gpus() > 0) GTEST_SKIP() << "context parallelism refuses GPUs";
  config::ParallelismSection p;
  distributed::check_context_parallel(p, 2, 64);
  EXPECT_THROW(distributed::check_context_parallel(p, 2, 66), ConfigError);  // 4 chunks
  p.context_parallel_load_balancer = "none";
  distributed::check_context_parallel(p, 2, 66);
  p.tensor_parallel_degree = 4;  // 33 tokens per rank for sequence parallelism over 4
  EXPECT_THROW(distributed::check_context_parallel(p, 2, 66), ConfigError);
  p.disable_sequence_parallel = true;
  distributed::check_context_parallel(p, 2, 66);
  try {
    distributed::check_context_parallel(p, 2, 65);
    ADD_FAILURE() << "65 tokens over 2 ranks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("training.seq_len = 65"), std::string::npos) << e.what();
  }
}

TEST(SequenceSplit, PositionsAreTheChunksPlaces) {
  testing::run_thread_ranks(2, [](int rank, distributed::World& world) {
    ContextParallel context(world.global(), LoadBalancer::HeadTail, RotateMethod::AllGather);
    auto want = context.shard(torch::arange(12, torch::kInt64).view({1, 12})).view({-1});
    EXPECT_TRUE(torch::equal(context.positions(6), want)) << "rank " << rank;
  });
}

}  // namespace unit_distributed_context_parallel_test
}  // namespace titan
