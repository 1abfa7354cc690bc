// The attention module (projections, per-head q/k RMSNorm, RoPE, GQA, head_dim != dim / heads)
// against a float64 loop written from the Qwen3 semantics in qwen3_tiny/README.md.
#include <gtest/gtest.h>

#include <cmath>

#include "titan/errors.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/rope.h"

namespace titan::models {
namespace unit_models_common_attention_test {

// Per position t and head: q = rmsnorm(Wq x)[head] * q_norm, RoPE at angle t f_i on pairs
// (i, i + Dh/2), causal softmax scaled by Dh^-0.5 over kv head h / G, then Wo.
torch::Tensor reference(AttentionImpl& a, const torch::Tensor& x, const torch::Tensor& inv_freq) {
  const auto& o = a.options;
  const int64_t S = x.size(1), H = o.n_heads, Hkv = o.n_kv_heads, Dh = o.head_dim, G = H / Hkv;
  auto proj = [&](const torch::Tensor& w, int64_t heads, RMSNorm norm, bool rotate) {
    std::vector<std::vector<std::vector<double>>> out(S, std::vector<std::vector<double>>(heads));
    auto y = torch::matmul(x[0], w.t());  // y: [S, heads * Dh]
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> v(Dh);
        double ss = 0.0;
        for (int64_t d = 0; d < Dh; ++d) ss += std::pow(v[d] = y[t][h * Dh + d].item<double>(), 2);
        if (norm) {
          const double inv = 1.0 / std::sqrt(ss / Dh + o.norm_eps);
          for (int64_t d = 0; d < Dh; ++d) v[d] *= inv * norm->weight[d].item<double>();
        }
        if (rotate) {
          std::vector<double> r(Dh);
          for (int64_t i = 0; i < Dh / 2; ++i) {
            const double ang = t * inv_freq[i].item<double>();
            r[i] = v[i] * std::cos(ang) - v[i + Dh / 2] * std::sin(ang);
            r[i + Dh / 2] = v[i + Dh / 2] * std::cos(ang) + v[i] * std::sin(ang);
          }
          v = r;
        }
        out[t][h] = v;
      }
    }
    return out;
  };
  auto q = proj(a.wq->weight, H, a.q_norm, true);
  auto k = proj(a.wk->weight, Hkv, a.k_norm, true);
  auto v = proj(a.wv->weight, Hkv, nullptr, false);
  auto attn = torch::zeros({S, H * Dh}, torch::kFloat64);
  for (int64_t t = 0; t < S; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> p(t + 1);
      double z = 0.0;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < Dh; ++d) dot += q[t][h][d] * k[j][h / G][d];
        z += (p[j] = std::exp(dot / std::sqrt(double(Dh))));
      }
      for (int64_t d = 0; d < Dh; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j <= t; ++j) acc += p[j] / z * v[j][h / G][d];
        attn[t][h * Dh + d].fill_(acc);
      }
    }
  }
  return torch::matmul(attn, a.wo->weight.t()).unsqueeze(0);  // [1, S, dim]
}

TEST(Attention, QwenStyleModuleMatchesLoop) {
  torch::manual_seed(7);
  AttentionOptions o;
  o.dim = 10;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.head_dim = 6;  // 4 x 6 = 24 != dim
  o.qk_norm = true;
  o.norm_eps = 1e-6;
  Attention attn(o, torch::TensorOptions().dtype(torch::kFloat64));
  {
    torch::NoGradGuard g;
    for (auto& p : attn->parameters()) p.normal_(0.0, 0.5);
  }
  EXPECT_EQ(attn->wq->weight.sizes(), (std::vector<int64_t>{24, 10}));
  EXPECT_EQ(attn->wo->weight.sizes(), (std::vector<int64_t>{10, 24}));
  const int64_t S = 7;
  auto inv_freq = rope_inv_freq({6, 1e6, std::nullopt, std::nullopt});
  auto [cos, sin] = rope_cos_sin(inv_freq, S, torch::kFloat64, torch::kCPU);
  auto x = torch::randn({1, S, 10}, torch::kFloat64);
  auto err = (attn->forward(x, cos, sin) - reference(*attn, x, inv_freq)).abs().max().item<double>();
  EXPECT_LE(err, 1e-13);
}

TEST(Attention, NamesFollowTorchTitan) {
  AttentionOptions o{8, 2, 1, 4, true, 1e-6};
  Attention attn(o, torch::TensorOptions());
  std::vector<std::string> names;
  for (const auto& p : attn->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"wq.weight", "wk.weight", "wv.weight", "wo.weight",
                                             "q_norm.weight", "k_norm.weight"}));
}

TEST(Attention, RejectsHeadsThatDoNotGroup) {
  AttentionOptions o{8, 3, 2, 4, false, 1e-6};
  EXPECT_THROW(Attention(o, torch::TensorOptions()), ConfigError);
}

}  // namespace unit_models_common_attention_test
}  // namespace titan::models
