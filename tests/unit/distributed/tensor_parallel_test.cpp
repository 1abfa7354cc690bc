// Tensor parallelism's divisibility checks, each refused with the numbers named: query heads,
// key/value heads, FFN hidden width (each asked of the block's parts), vocabulary, and seq_len
// under sequence parallelism.
#include "titan/distributed/tensor_parallel.h"

#include <gtest/gtest.h>

#include "titan/errors.h"
#include "titan/models/common/transformer.h"

namespace titan::distributed {
namespace unit_distributed_tensor_parallel_test {

// 16 query heads, 8 key/value heads, FFN width 768, vocabulary 2048.
models::TransformerArgs args() {
  models::TransformerArgs a;
  a.dim = 256;
  a.n_layers = 2;
  a.n_heads = 16;
  a.n_kv_heads = 8;
  a.vocab_size = 2048;
  a.hidden_dim = 768;
  return a;
}

std::string refusal(const models::TransformerArgs& a, int tp, int64_t seq_len, bool sp) {
  models::Transformer model(a, torch::TensorOptions().device(torch::kMeta));
  try {
    check_tensor_parallel(model, tp, seq_len, sp);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TensorParallelChecks, EachIndivisibleSizeIsNamed) {
  EXPECT_EQ(refusal(args(), 8, 64, true), "");
  EXPECT_NE(refusal(args(), 16, 64, false).find("key/value heads (8)"), std::string::npos);
  auto a = args();
  a.hidden_dim = 772;
  EXPECT_NE(refusal(a, 8, 64, false).find("feed-forward hidden width (772)"), std::string::npos)
      << refusal(a, 8, 64, false);
  a = args();
  a.vocab_size = 2050;
  EXPECT_NE(refusal(a, 4, 64, false).find("vocabulary size (2050)"), std::string::npos);
  a = args();
  a.n_heads = 12;
  a.n_kv_heads = 4;
  a.dim = 240;
  EXPECT_NE(refusal(a, 8, 64, false).find("query heads (12)"), std::string::npos);
  EXPECT_NE(refusal(args(), 8, 60, true).find("training.seq_len (60)"), std::string::npos);
  EXPECT_EQ(refusal(args(), 8, 60, false), "");  // no sequence parallelism: seq_len is free
}

}  // namespace unit_distributed_tensor_parallel_test
}  // namespace titan::distributed
