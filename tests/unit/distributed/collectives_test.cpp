// The autograd collectives and the vocab-parallel cross-entropy against single-process
// references: 2 and 4 ranks as threads; every rank's forward value and input gradient (for
// its own upstream gradient) must match what one process computes from the whole tensors.
// Data movement is exact; sums of fp32 values match within 1e-6 relative.
#include "titan/distributed/collectives.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "support/thread_ranks.h"
#include "titan/distributed/loss_parallel.h"
#include "titan/models/common/loss.h"

namespace titan {
namespace unit_distributed_collectives_test {

using distributed::ProcessGroup;
using distributed::World;

constexpr int64_t B = 2, N = 3, D = 5;  // batch, sequence rows per rank, width

// upstream[r]: rank r's gradient of its output (shape `shape`), the same on every call.
std::vector<torch::Tensor> upstreams(int n, const std::vector<int64_t>& shape) {
  torch::manual_seed(7);
  std::vector<torch::Tensor> out;
  for (int r = 0; r < n; ++r) out.push_back(torch::randn(shape));
  return out;
}

torch::Tensor sum_of(const std::vector<torch::Tensor>& ts) {
  auto s = torch::zeros_like(ts[0]);
  for (const auto& t : ts) s += t;
  return s;
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllGatherAlongSequenceReduceScattersTheGradient) {
  const int n = GetParam();
  torch::manual_seed(1);
  auto whole = torch::randn({B, N * n, D});
  auto grads = upstreams(n, {B, N * n, D});
  testing::run_thread_ranks(n, [&](int r, World& world) {
    auto x = whole.narrow(1, r * N, N).clone().requires_grad_();
    auto y = distributed::all_gather_along(x, 1, *world.global());  // [B, N * n, D]
    EXPECT_TRUE(torch::equal(y, whole));
    y.backward(grads[r]);
    EXPECT_TRUE(torch::allclose(x.grad(), sum_of(grads).narrow(1, r * N, N), 1e-6, 1e-6));
  });
}

TEST_P(Collectives, ReduceScatterAlongSequenceAllGathersTheGradient) {
  const int n = GetParam();
  torch::manual_seed(2);
  std::vector<torch::Tensor> partial;
  for (int r = 0; r < n; ++r) partial.push_back(torch::randn({B, N * n, D}));
  auto grads = upstreams(n, {B, N, D});
  testing::run_thread_ranks(n, [&](int r, World& world) {
    auto x = partial[r].clone().requires_grad_();
    auto y = distributed::reduce_scatter_along(x, 1, *world.global());  // [B, N, D]
    EXPECT_TRUE(torch::allclose(y, sum_of(partial).narrow(1, r * N, N), 1e-6, 1e-6));
    y.backward(grads[r]);
    EXPECT_TRUE(torch::equal(x.grad(), torch::cat(grads, 1)));
  });
}

TEST_P(Collectives, CopyAndReduceAreTransposesOfEachOther) {
  const int n = GetParam();
  torch::manual_seed(3);
  std::vector<torch::Tensor> xs;
  for (int r = 0; r < n; ++r) xs.push_back(torch::randn({B, N, D}));
  auto grads = upstreams(n, {B, N, D});
  testing::run_thread_ranks(n, [&](int r, World& world) {
    auto a = xs[r].clone().requires_grad_();
    auto copied = distributed::copy_to_parallel_region(a, *world.global());
    EXPECT_TRUE(torch::equal(copied, xs[r]));
    copied.backward(grads[r]);
    EXPECT_TRUE(torch::allclose(a.grad(), sum_of(grads), 1e-6, 1e-6));
    auto b = xs[r].clone().requires_grad_();
    auto reduced = distributed::reduce_from_parallel_region(b, *world.global());
    EXPECT_TRUE(torch::allclose(reduced, sum_of(xs), 1e-6, 1e-6));
    reduced.backward(grads[r]);
    EXPECT_TRUE(torch::equal(b.grad(), grads[r]));
  });
}

TEST_P(Collectives, GatherLastDimKeepsThisRanksGradientColumns) {
  const int n = GetParam();
  torch::manual_seed(4);
  auto whole = torch::randn({B, N, D * n});
  auto grads = upstreams(n, {B, N, D * n});
  testing::run_thread_ranks(n, [&](int r, World& world) {
    auto x = whole.narrow(-1, r * D, D).clone().requires_grad_();
    auto y = distributed::gather_last_dim(x, *world.global());
    EXPECT_TRUE(torch::equal(y, whole));
    y.backward(grads[r]);
    EXPECT_TRUE(torch::equal(x.grad(), grads[r].narrow(-1, r * D, D)));
  });
}

TEST_P(Collectives, VocabParallelCrossEntropyMatchesTheWholeVocabulary) {
  const int n = GetParam();
  constexpr int64_t kVocabPerRank = 7;
  torch::manual_seed(5);
  auto logits = torch::randn({B, N, kVocabPerRank * n}) * 4;
  auto labels = torch::randint(kVocabPerRank * n, {B, N}, torch::kLong);
  auto reference_logits = logits.clone().requires_grad_();
  auto reference = models::cross_entropy_sum(reference_logits, labels);
  reference.backward();
  testing::run_thread_ranks(n, [&](int r, World& world) {
    auto local = logits.narrow(-1, r * kVocabPerRank, kVocabPerRank).clone().requires_grad_();
    auto loss = distributed::vocab_parallel_cross_entropy_sum(local, labels, *world.global());
    EXPECT_NEAR(loss.item<double>(), reference.item<double>(), 1e-6 * reference.item<double>());
    loss.backward();
    auto expected = reference_logits.grad().narrow(-1, r * kVocabPerRank, kVocabPerRank);
    EXPECT_TRUE(torch::allclose(local.grad(), expected, 1e-5, 1e-6));
  });
}

// all_to_all_rows's `during` runs while the rows travel, and its backward while their gradients
// travel back: rank 1 joins each all-to-all only once rank 0 has done that work, a deadlock
// (rank 1 gives up after 20 s) if rank 0 waits for the rows first.
class Signal {
 public:
  void raise() {
    std::lock_guard<std::mutex> lock(mutex_);
    raised_ = true;
    cv_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [this] { return raised_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool raised_ = false;
};

constexpr auto kF64 = torch::kFloat64;

TEST(AllToAllRows, RunsWorkWhileTheRowsTravelBothWays) {
  Signal forward_work, backward_work;
  testing::run_thread_ranks(
      2,
      [&](int rank, World& world) {
        // Rank 0 keeps 1 of its 4 rows and sends 3; rank 1 sends 2 and keeps 2.
        auto x = torch::full({4, D}, double(rank), kF64).requires_grad_();  // [4, D]
        const std::vector<int64_t> in =
            rank == 0 ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{2, 2};
        const std::vector<int64_t> out_splits =
            rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 2};
        if (rank == 1) {
          ASSERT_TRUE(forward_work.wait()) << "rank 0 waited for the rows before `during`";
          auto out = distributed::all_to_all_rows(x, out_splits, in, *world.global());
          ASSERT_TRUE(backward_work.wait())
              << "rank 0 waited for the gradients before the backward of `during`";
          (out * 3).sum().backward();  // out: [5, D], 3 rows from rank 0 first
          EXPECT_TRUE(torch::equal(
              out, torch::cat({torch::zeros({3, D}, kF64), torch::ones({2, D}, kF64)})));
          EXPECT_TRUE(torch::equal(x.grad(), torch::cat({torch::full({2, D}, 5.0, kF64),
                                                         torch::full({2, D}, 3.0, kF64)})));
          return;
        }
        auto w = torch::ones({1}, kF64).requires_grad_();
        w.register_hook([&](const torch::Tensor& g) {
          backward_work.raise();
          return g;
        });
        torch::Tensor y;
        auto out = distributed::all_to_all_rows(x, out_splits, in, *world.global(), [&] {
          y = w * 2;
          forward_work.raise();
        });
        ((out * 5).sum() + y.sum()).backward();  // out: [3, D], 1 row from rank 0 first
        EXPECT_TRUE(
            torch::equal(out, torch::cat({torch::zeros({1, D}, kF64), torch::ones({2, D}, kF64)})));
        EXPECT_TRUE(torch::equal(x.grad(), torch::cat({torch::full({1, D}, 5.0, kF64),
                                                       torch::full({3, D}, 3.0, kF64)})));
        EXPECT_EQ(w.grad().item<double>(), 2.0);
      },
      std::chrono::seconds(30));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 4));

}  // namespace unit_distributed_collectives_test
}  // namespace titan
