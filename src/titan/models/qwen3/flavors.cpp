#include "titan/models/qwen3/flavors.h"

namespace titan::models::qwen3 {
namespace {

TransformerArgs qwen3(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                      int64_t hidden_dim, bool tied, int64_t vocab_size = 151936) {
  TransformerArgs a;
  a.dim = dim;
  a.n_layers = n_layers;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.head_dim = 128;
  a.hidden_dim = hidden_dim;
  a.vocab_size = vocab_size;
  a.norm_eps = 1e-6;
  a.rope_theta = 1e6;
  a.qk_norm = true;
  a.tie_embeddings = tied;
  return a;
}

// Every layer a softmax top-k mixture of experts with renormalised gates (Qwen3-MoE);
// `dense_hidden` is Hugging Face's unused intermediate_size, kept so configs round-trip.
TransformerArgs qwen3_moe(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                          int64_t experts, int64_t expert_hidden, int64_t dense_hidden,
                          double rope_theta, int64_t vocab_size = 151936) {
  TransformerArgs a = qwen3(dim, n_layers, n_heads, n_kv_heads, dense_hidden, false, vocab_size);
  a.rope_theta = rope_theta;
  MoEArgs m;
  m.num_experts = experts;
  m.hidden_dim = expert_hidden;
  m.top_k = 8;
  m.score_func = MoEArgs::ScoreFunc::Softmax;
  m.route_norm = true;
  a.moe = m;
  return a;
}

// titan's own CI size of debugmodel_moe (not a TorchTitan flavor): 2 layers, 4/2 heads of 64,
// 8 experts of width 128, top 2, so that layout tests train in seconds on 2 CPU cores.
TransformerArgs debugmodel_moe_small() {
  TransformerArgs a = qwen3_moe(256, 2, 4, 2, 8, 128, 768, 1e6, 2048);
  a.head_dim = 64;
  a.moe->top_k = 2;
  return a;
}

}  // namespace

const FlavorTable& flavors() {
  static const FlavorTable table = {
      {"debugmodel", qwen3(256, 8, 16, 8, 3072, false, 2048)},
      {"0.6B", qwen3(1024, 28, 16, 8, 3072, true)},
      {"1.7B", qwen3(2048, 28, 16, 8, 6144, true)},
      {"4B", qwen3(2560, 36, 32, 8, 9728, true)},
      {"8B", qwen3(4096, 36, 32, 8, 12288, false)},
      {"14B", qwen3(5120, 40, 40, 8, 17408, false)},
      {"32B", qwen3(5120, 64, 64, 8, 25600, false)},
      {"debugmodel_moe", qwen3_moe(256, 8, 16, 8, 64, 768, 3072, 1e6, 2048)},
      {"30B-A3B", qwen3_moe(2048, 48, 32, 4, 128, 768, 6144, 1e6)},
      {"235B-A22B", qwen3_moe(4096, 94, 64, 4, 128, 1536, 12288, 5e6)},
      {"debugmodel_moe_small", debugmodel_moe_small()},
  };
  return table;
}

}  // namespace titan::models::qwen3
