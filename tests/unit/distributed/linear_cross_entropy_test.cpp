// The fused output projection + cross-entropy against the eager composition
// cross_entropy_sum(linear(hidden, weight)), written out in float64: in float64 the loss and the
// gradients of hidden and weight to 1e-12 for blocks of 1, 3, 4 and all 10 tokens by 1, 5 and
// all 12 vocabulary rows (the last block short or not; whole rows take one sweep); float32 to
// 1e-5 relative of float64; bfloat16 to 1e-2 of cross_entropy_sum in bfloat16. Vocab-parallel
// over 2 and 4 thread ranks (blocks of 2 rows): every rank's loss, its rows of the weight
// gradient and the sum of the ranks' partial hidden gradients against the whole vocabulary, to
// 1e-12. Without gradients the value alone, equal to the eager one. A zero-bubble pipeline's
// input and weight passes give one backward's gradients; the weight's gradient is handed over
// once, never copied.
#include "titan/distributed/linear_cross_entropy.h"

#include <gtest/gtest.h>

#include <tuple>

#include "support/relative_error.h"
#include "support/thread_ranks.h"
#include "titan/models/common/loss.h"
#include "titan/platform/memory.h"

namespace titan::distributed {
namespace unit_distributed_linear_cross_entropy_test {

constexpr int64_t B = 2, S = 5, D = 6, V = 12;

struct Inputs {
  torch::Tensor hidden, weight, labels;  // [B, S, D], [V, D], [B, S]
};

Inputs inputs(torch::ScalarType dtype) {
  torch::manual_seed(5);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  return {torch::randn({B, S, D}, opts).to(dtype), torch::randn({V, D}, opts).to(dtype),
          torch::randint(0, V, {B, S})};
}

struct Result {
  torch::Tensor loss, dhidden, dweight;
};

// The eager composition (its softmax in float32), or with `exact` the same in float64.
Result eager(const Inputs& in, bool exact = false) {
  auto h = in.hidden.clone().requires_grad_(), w = in.weight.clone().requires_grad_();
  auto logits = torch::linear(h, w);  // [B, S, V]
  auto loss = exact ? -torch::log_softmax(logits, -1).gather(-1, in.labels.unsqueeze(-1)).sum()
                    : models::cross_entropy_sum(logits, in.labels);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

Result fused(const Inputs& in, const LinearCrossEntropyOptions& options) {
  auto h = in.hidden.clone().requires_grad_(), w = in.weight.clone().requires_grad_();
  auto loss = linear_cross_entropy_sum(h, w, in.labels, options);
  loss.backward(torch::full({}, 0.5, loss.options()));  // a scaled upstream, as loss / tokens
  return {loss.detach(), h.grad() * 2, w.grad() * 2};
}

using testing::max_rel;

// Blocks of (tokens, vocabulary rows); 0 rows: as many as the budget allows (the whole 12).
class LinearCrossEntropy : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(LinearCrossEntropy, MatchesTheEagerLossAndGradientsInFloat64) {
  const auto in = inputs(torch::kFloat64);
  const auto want = eager(in, true);
  const auto [tokens, vocab] = GetParam();
  const auto got = fused(in, {nullptr, tokens, vocab});
  EXPECT_LE(max_rel(got.loss, want.loss), 1e-12);
  EXPECT_LE(max_rel(got.dhidden, want.dhidden), 1e-12) << "d hidden";
  EXPECT_LE(max_rel(got.dweight, want.dweight), 1e-12) << "d weight";
}

INSTANTIATE_TEST_SUITE_P(Blocks, LinearCrossEntropy,
                         ::testing::Combine(::testing::Values(1, 3, 4, 10),
                                            ::testing::Values(0, 1, 5, 12)));

// On one rank the default blocks hold whole vocabulary rows (one sweep, three GEMMs) for at
// least kOneSweepTokens tokens while they fit kOneSweepLogits; a larger vocabulary, or a
// tensor-parallel slice, takes two sweeps over blocks of kLogitsPerBlock.
TEST(LinearCrossEntropyBlocks, OneSweepOverWholeRowsWhereTheyFit) {
  const auto qwen3 = loss_block(4096, 151936, false);
  EXPECT_TRUE(qwen3.one_sweep);
  EXPECT_EQ(qwen3.tokens, kOneSweepTokens);
  EXPECT_EQ(qwen3.vocab, 151936);
  const auto debug = loss_block(4096, 2048, false);
  EXPECT_TRUE(debug.one_sweep);
  EXPECT_EQ(debug.tokens, kTokensPerBlock);
  EXPECT_TRUE(loss_block(100, 151936, false).one_sweep);
  const auto huge = loss_block(4096, 300000, false);
  EXPECT_FALSE(huge.one_sweep);
  EXPECT_LE(huge.tokens * huge.vocab, kLogitsPerBlock);
  const auto sliced = loss_block(4096, 151936 / 2, true);
  EXPECT_FALSE(sliced.one_sweep);
  EXPECT_EQ(sliced.tokens * sliced.vocab, kLogitsPerBlock);
}

TEST(LinearCrossEntropyPrecision, Float32AndBfloat16StayNearTheReference) {
  const auto reference = eager(inputs(torch::kFloat64), true);
  const auto f32 = fused(inputs(torch::kFloat), {nullptr, 3, 5});
  EXPECT_LE(max_rel(f32.loss, reference.loss), 1e-5);
  EXPECT_LE(max_rel(f32.dhidden, reference.dhidden), 1e-5);
  EXPECT_LE(max_rel(f32.dweight, reference.dweight), 1e-5);
  const auto bf16_in = inputs(torch::kBFloat16);
  const auto bf16 = fused(bf16_in, {nullptr, 3, 5}), bf16_eager = eager(bf16_in);
  EXPECT_EQ(bf16.dweight.scalar_type(), torch::kBFloat16);
  EXPECT_LE(max_rel(bf16.loss, bf16_eager.loss), 1e-2);
  EXPECT_LE(max_rel(bf16.dhidden, bf16_eager.dhidden), 1e-2);
  EXPECT_LE(max_rel(bf16.dweight, bf16_eager.dweight), 1e-2);
}

// The upstream gradient (1 / tokens in training) multiplies in float32, as in eager, not
// rounded to bfloat16 first: 1/3 is 0.3333 in float32, 0.3340 in bfloat16.
TEST(LinearCrossEntropyPrecision, Bfloat16ScalesByTheUpstreamGradientInFloat32) {
  const auto in = inputs(torch::kBFloat16);
  auto h = in.hidden.clone().requires_grad_(), w = in.weight.clone().requires_grad_();
  auto loss = linear_cross_entropy_sum(h, w, in.labels, {nullptr, 3});
  loss.backward(torch::full({}, 1.0 / 3.0, loss.options()));
  auto h1 = in.hidden.clone().requires_grad_(), w1 = in.weight.clone().requires_grad_();
  linear_cross_entropy_sum(h1, w1, in.labels, {nullptr, 3}).backward();
  const auto want = (h1.grad().to(torch::kFloat) / 3).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(h.grad(), want));
}

// A zero-bubble pipeline runs the loss's backward twice on one graph: the input pass asks for
// the hidden states' gradient only, the weight pass then for the weight's. Together they give
// what one backward gives, bit for bit.
TEST(LinearCrossEntropyPrecision, InputPassThenWeightPassGiveOneBackwardsGradients) {
  const auto in = inputs(torch::kFloat32);
  auto h = in.hidden.clone().requires_grad_(), w = in.weight.clone().requires_grad_();
  auto loss = linear_cross_entropy_sum(h, w, in.labels, {nullptr, 3}) / 7.0;
  auto input_pass = torch::autograd::grad({loss}, {h}, {}, /*retain_graph=*/true);
  auto weight_pass = torch::autograd::grad({loss}, {w});
  auto h2 = in.hidden.clone().requires_grad_(), w2 = in.weight.clone().requires_grad_();
  (linear_cross_entropy_sum(h2, w2, in.labels, {nullptr, 3}) / 7.0).backward();
  EXPECT_TRUE(torch::equal(input_pass[0], h2.grad()));
  EXPECT_TRUE(torch::equal(weight_pass[0], w2.grad()));
}

// The weight's gradient is handed over, not copied: asking for it a second time is refused by
// name rather than answered with a wrong (already scaled) gradient.
TEST(LinearCrossEntropyPrecision, TheWeightGradientIsGivenOnce) {
  const auto in = inputs(torch::kFloat32);
  auto h = in.hidden.clone().requires_grad_(), w = in.weight.clone().requires_grad_();
  auto loss = linear_cross_entropy_sum(h, w, in.labels, {nullptr, 3});
  torch::autograd::grad({loss}, {w}, {}, /*retain_graph=*/true);
  try {
    torch::autograd::grad({loss}, {w});
    ADD_FAILURE() << "a second weight gradient was given";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused loss's weight gradient"), std::string::npos)
        << e.what();
  }
}

// Backward adds no second weight-sized tensor to what forward left alive (forward's gradient
// is scaled in place): its peak stays under half a weight above the start.
TEST(LinearCrossEntropyMemory, BackwardDoesNotCopyTheWeightGradient) {
  platform::enable_memory_counting();
  torch::manual_seed(0);
  auto h = torch::randn({1, 8, 64}).requires_grad_(), w = torch::randn({4096, 64}).requires_grad_();
  auto loss = linear_cross_entropy_sum(h, w, torch::randint(0, 4096, {1, 8})) / 8.0;
  const int64_t before = platform::live_tensor_bytes();
  platform::reset_peak_tensor_bytes();
  loss.backward();
  EXPECT_LT(platform::peak_tensor_bytes() - before, w.nbytes() / 2);
}

TEST(LinearCrossEntropyPrecision, WithoutGradientsGivesTheValue) {
  const auto in = inputs(torch::kFloat64);
  const auto want = eager(in, true).loss;
  torch::NoGradGuard no_grad;
  auto loss = linear_cross_entropy_sum(in.hidden, in.weight, in.labels, {nullptr, 4});
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_LE(max_rel(loss, want), 1e-12);
}

class VocabParallelLinearCrossEntropy : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelLinearCrossEntropy, EachRanksSliceMatchesTheWholeVocabulary) {
  const int n = GetParam();
  const auto in = inputs(torch::kFloat64);
  const auto want = eager(in, true);
  const int64_t rows = V / n;
  std::vector<torch::Tensor> dhidden(n);
  testing::run_thread_ranks(n, [&](int r, distributed::World& world) {
    Inputs mine{in.hidden, in.weight.narrow(0, r * rows, rows).clone(), in.labels};
    const auto got = fused(mine, {world.global().get(), 3, 2});
    EXPECT_LE(max_rel(got.loss, want.loss), 1e-12) << "rank " << r;
    EXPECT_LE(max_rel(got.dweight, want.dweight.narrow(0, r * rows, rows)), 1e-12) << r;
    dhidden[r] = got.dhidden;
  });
  auto summed = torch::zeros_like(want.dhidden);
  for (const auto& d : dhidden) summed += d;
  EXPECT_LE(max_rel(summed, want.dhidden), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Ranks, VocabParallelLinearCrossEntropy, ::testing::Values(2, 4));

}  // namespace unit_distributed_linear_cross_entropy_test
}  // namespace titan::distributed
