#include "titan/models/llama3/flavors.h"

namespace titan::models::llama3 {
namespace {

constexpr int64_t kVocab = 128256;
constexpr double kTheta = 500000.0;
// Llama 3.1's RoPE scaling with the factor given; TorchTitan (0.2.2's RoPEScalingArgs, 0.3.0's
// ComplexRoPE with scaling="llama") gives every flavor factor 8, debugmodel included.
RopeScaling llama3_scaling(double factor) { return RopeScaling{factor, 1.0, 4.0, 8192}; }

TransformerArgs llama(int64_t dim, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                      double ffn_dim_multiplier, int64_t multiple_of, double rope_factor,
                      bool tied) {
  TransformerArgs a;
  a.dim = dim;
  a.n_layers = n_layers;
  a.n_heads = n_heads;
  a.n_kv_heads = n_kv_heads;
  a.vocab_size = kVocab;
  a.ffn_dim_multiplier = ffn_dim_multiplier;
  a.multiple_of = multiple_of;
  a.rope_theta = kTheta;
  a.rope_scaling = llama3_scaling(rope_factor);
  a.tie_embeddings = tied;
  return a;
}

TransformerArgs debugmodel() {
  TransformerArgs a;
  a.dim = 256;
  a.n_layers = 6;
  a.n_heads = 16;
  a.vocab_size = 2048;
  a.rope_theta = kTheta;
  a.rope_scaling = llama3_scaling(8.0);
  return a;
}

// The "~100M" benchmark shape: a GPT-2-small-sized body (dim 768, 12 layers) with
// grouped-query attention (12 heads, 4 key/value heads) on the debug model's byte-level
// vocabulary; 78.7M parameters with vocab 2048 (hidden width 2048 by TorchTitan's rule).
TransformerArgs bench_100m() {
  TransformerArgs a = debugmodel();
  a.dim = 768;
  a.n_layers = 12;
  a.n_heads = 12;
  a.n_kv_heads = 4;
  return a;
}

}  // namespace

const FlavorTable& flavors() {
  static const FlavorTable table = {
      {"debugmodel", debugmodel()},
      {"100M", bench_100m()},
      {"1B", llama(2048, 16, 32, 8, 1.5, 256, 32.0, true)},
      {"3B", llama(3072, 28, 24, 8, 1.0, 256, 32.0, true)},
      {"8B", llama(4096, 32, 32, 8, 1.3, 1024, 8.0, false)},
      {"70B", llama(8192, 80, 64, 8, 1.3, 4096, 8.0, false)},
      {"405B", llama(16384, 126, 128, 8, 1.2, 4096, 8.0, false)},
  };
  return table;
}

}  // namespace titan::models::llama3
