// Chunked causal attention (online softmax over (query chunk, key chunk) pairs) against the
// dense float64 formulation: any set of query chunks over keys given in any chunk order, for
// MHA, GQA and MLA's narrower values; forward and the gradients of q, k and v to 1e-12, and
// float32 to 1e-5 of float64.
#include "titan/models/common/chunked_attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/dense_attention.h"

namespace titan::models {
namespace unit_models_common_chunked_attention_test {

struct Case {
  int64_t heads, kv_heads, head_dim, value_dim, chunks, chunk_len;
  std::vector<int64_t> query_chunks, key_chunks;
};

// x [B, heads, n L, D] -> the chunks `which` of it, concatenated in that order.
torch::Tensor pick(const torch::Tensor& x, const std::vector<int64_t>& which, int64_t len) {
  std::vector<torch::Tensor> pieces;
  for (int64_t c : which) pieces.push_back(x.narrow(2, c * len, len));
  return torch::cat(pieces, 2);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

class ChunkedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(ChunkedAttention, MatchesDenseAttentionAndItsGradients) {
  const Case c = GetParam();
  torch::manual_seed(11);
  const int64_t B = 2, S = c.chunks * c.chunk_len, L = c.chunk_len;
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto q = torch::randn({B, c.heads, S, c.head_dim}, opts).requires_grad_();
  auto k = torch::randn({B, c.kv_heads, S, c.head_dim}, opts).requires_grad_();
  auto v = torch::randn({B, c.kv_heads, S, c.value_dim}, opts).requires_grad_();
  // Upstream gradient only on the chosen query rows, so the dense k and v gradients are theirs.
  auto upstream = torch::zeros({B, c.heads, S, c.value_dim}, opts);
  for (int64_t ch : c.query_chunks) upstream.narrow(2, ch * L, L).normal_();
  auto want = testing::dense_attention(q, k, v, scale);  // [B, H, S, Dv]
  auto want_grads = torch::autograd::grad({want}, {q, k, v}, {upstream});

  auto ql = pick(q.detach(), c.query_chunks, L).requires_grad_();
  auto kl = pick(k.detach(), c.key_chunks, L).requires_grad_();
  auto vl = pick(v.detach(), c.key_chunks, L).requires_grad_();
  auto out = chunked_causal_attention(ql, kl, vl, scale, {c.query_chunks, c.key_chunks, L});
  EXPECT_LE(max_diff(out, pick(want.detach(), c.query_chunks, L)), 1e-12);
  out.backward(pick(upstream, c.query_chunks, L));
  EXPECT_LE(max_diff(ql.grad(), pick(want_grads[0], c.query_chunks, L)), 1e-12) << "dq";
  EXPECT_LE(max_diff(kl.grad(), pick(want_grads[1], c.key_chunks, L)), 1e-12) << "dk";
  EXPECT_LE(max_diff(vl.grad(), pick(want_grads[2], c.key_chunks, L)), 1e-12) << "dv";
}

INSTANTIATE_TEST_SUITE_P(
    LayoutsAndHeads, ChunkedAttention,
    ::testing::Values(Case{4, 4, 8, 8, 1, 13, {0}, {0}},             // one chunk: plain causal
                      Case{4, 2, 8, 8, 4, 5, {1, 2}, {3, 0, 2, 1}},  // GQA, keys shuffled
                      Case{6, 1, 8, 8, 8, 3, {0, 7}, {0, 1, 2, 3, 4, 5, 6, 7}},  // head-tail
                      Case{4, 4, 12, 8, 4, 6, {3}, {2, 3, 0, 1}},                // MLA: Dv < Dh
                      Case{2, 2, 8, 8, 2, 1, {1, 0}, {0, 1}},                    // one-token chunks
                      Case{4, 2, 16, 16, 4, 37, {0, 3}, {0, 1, 2, 3}}));  // past kernel blocks

TEST(ChunkedAttentionPrecision, Float32WithinOneInHundredThousand) {
  torch::manual_seed(12);
  auto q = torch::randn({1, 4, 24, 16}, torch::kFloat64);
  auto k = torch::randn({1, 2, 24, 16}, torch::kFloat64);
  auto v = torch::randn({1, 2, 24, 16}, torch::kFloat64);
  const ChunkLayout layout{{0, 1, 2, 3}, {0, 1, 2, 3}, 6};
  auto want = chunked_causal_attention(q, k, v, 0.25, layout);
  auto f32 = chunked_causal_attention(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat),
                                      0.25, layout);
  EXPECT_EQ(f32.scalar_type(), torch::kFloat32);
  EXPECT_LE(max_diff(f32.to(torch::kFloat64), want), 1e-5);
}

TEST(ChunkedAttentionPrecision, RefusesQueriesWithoutTheirOwnKeys) {
  auto q = torch::randn({1, 2, 4, 8}), kv = torch::randn({1, 2, 4, 8});
  EXPECT_THROW(chunked_causal_attention(q, kv, kv, 1.0, {{1}, {0}, 4}), c10::Error);
  EXPECT_THROW(chunked_causal_attention(q, kv, kv, 1.0, {{0}, {0}, 3}), c10::Error);  // shapes
}

}  // namespace unit_models_common_chunked_attention_test
}  // namespace titan::models
