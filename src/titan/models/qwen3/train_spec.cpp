#include "titan/models/qwen3/train_spec.h"

#include "titan/models/qwen3/parallelize.h"

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
  };
  return table;
}

train::TrainSpec train_spec() {
  return transformer_train_spec("qwen3", flavors(), {"qwen3"}, "Qwen3ForCausalLM",
                                /*qk_norm=*/true, parallelize_qwen3);
}

}  // namespace titan::models::qwen3
