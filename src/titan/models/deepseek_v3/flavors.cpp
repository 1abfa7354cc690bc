#include "titan/models/deepseek_v3/flavors.h"

namespace titan::models::deepseek_v3 {
namespace {

// The fields every flavor sets; MoE routing and q_lora_rank / mscale are the flavor's.
struct Shape {
  int64_t dim, n_layers, n_heads, vocab_size, dense_hidden, moe_hidden, experts, shared, top_k;
  int64_t n_dense_layers, q_lora_rank;
  double mscale;
};

TransformerArgs deepseek(const Shape& s, MoEArgs::ScoreFunc score_func) {
  TransformerArgs a;
  a.dim = s.dim;
  a.n_layers = s.n_layers;
  a.n_heads = s.n_heads;
  a.vocab_size = s.vocab_size;
  a.hidden_dim = s.dense_hidden;
  a.norm_eps = 1e-6;
  a.rope_theta = 10000.0;
  a.yarn = YarnScaling{40.0, 32.0, 1.0, 4096};
  MLAArgs m;
  m.q_lora_rank = s.q_lora_rank;
  m.kv_lora_rank = 512;
  m.qk_nope_head_dim = 128;
  m.qk_rope_head_dim = 64;
  m.v_head_dim = 128;
  m.mscale = s.mscale;
  a.mla = m;
  a.head_dim = m.qk_head_dim();
  MoEArgs e;
  e.num_experts = s.experts;
  e.hidden_dim = s.moe_hidden;
  e.num_shared_experts = s.shared;
  e.top_k = s.top_k;
  e.score_func = score_func;
  a.moe = e;
  a.n_dense_layers = s.n_dense_layers;
  return a;
}

TransformerArgs flavor_236b() {
  auto a = deepseek({5120, 60, 128, 102400, 12288, 1536, 160, 2, 6, 1, 1536, 1.0},
                    MoEArgs::ScoreFunc::Softmax);
  a.moe->num_expert_groups = 8;
  a.moe->num_limited_groups = 3;
  a.moe->route_scale = 16.0;
  return a;
}

TransformerArgs flavor_671b() {
  auto a = deepseek({7168, 61, 128, 129280, 18432, 2048, 256, 1, 8, 3, 1536, 1.0},
                    MoEArgs::ScoreFunc::Sigmoid);
  a.moe->num_expert_groups = 8;
  a.moe->num_limited_groups = 4;
  a.moe->route_scale = 2.5;
  a.moe->route_norm = true;
  return a;
}

}  // namespace

const FlavorTable& flavors() {
  static const FlavorTable table = {
      {"debugmodel",
       deepseek({256, 6, 16, 2048, 1024, 256, 8, 2, 3, 1, 0, 0.70}, MoEArgs::ScoreFunc::Softmax)},
      {"16B", deepseek({2048, 27, 16, 102400, 10944, 1408, 64, 2, 6, 1, 0, 0.70},
                       MoEArgs::ScoreFunc::Softmax)},
      {"236B", flavor_236b()},
      {"671B", flavor_671b()},
  };
  return table;
}

}  // namespace titan::models::deepseek_v3
