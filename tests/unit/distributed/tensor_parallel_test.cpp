// Tensor parallelism's divisibility checks, each refused with the numbers named: query heads,
// key/value heads, FFN hidden width, vocabulary, and seq_len under sequence parallelism.
#include "titan/distributed/tensor_parallel.h"

#include <gtest/gtest.h>

#include "titan/errors.h"

namespace titan::distributed {
namespace {

models::ModelShape shape() {
  models::ModelShape s;
  s.dim = 256;
  s.n_layers = 2;
  s.n_heads = 16;
  s.n_kv_heads = 8;
  s.head_dim = 16;
  s.vocab_size = 2048;
  s.ffn_hidden_dim = 768;
  return s;
}

std::string refusal(const models::ModelShape& s, int tp, int64_t seq_len, bool sp) {
  try {
    check_tensor_parallel(s, tp, seq_len, sp);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TensorParallelChecks, EachIndivisibleSizeIsNamed) {
  EXPECT_EQ(refusal(shape(), 8, 64, true), "");
  EXPECT_NE(refusal(shape(), 16, 64, false).find("key/value heads (8)"), std::string::npos);
  auto s = shape();
  s.ffn_hidden_dim = 772;
  EXPECT_NE(refusal(s, 8, 64, false).find("feed-forward hidden width (772)"), std::string::npos)
      << refusal(s, 8, 64, false);
  s = shape();
  s.vocab_size = 2050;
  EXPECT_NE(refusal(s, 4, 64, false).find("vocabulary size (2050)"), std::string::npos);
  s = shape();
  s.n_heads = 12;
  EXPECT_NE(refusal(s, 8, 64, false).find("query heads (12)"), std::string::npos);
  EXPECT_NE(refusal(shape(), 8, 60, true).find("training.seq_len (60)"), std::string::npos);
  EXPECT_EQ(refusal(shape(), 8, 60, false), "");  // no sequence parallelism: seq_len is free
}

}  // namespace
}  // namespace titan::distributed
