// deepseek_v3 family: parity with the float64 reference of deepseek_v3_tiny (MLA with q and kv
// latents and pairwise RoPE on a shared key part, value width 16 != q/k width 24; layer 0 dense,
// layers 1-2 sigmoid-scored group-limited top-2 over 8 experts chosen with the correction bias,
// route_scale 2.5, a shared expert), routing token by token included; MLA without a q latent
// against a float64 loop; YaRN frequencies and softmax scale by hand; the flavors' sizes.
#include <gtest/gtest.h>

#include <cmath>

#include "../hf_parity.h"
#include "titan/models/common/mla.h"
#include "titan/models/common/transformer.h"
#include "titan/protocols/train_spec.h"

namespace titan {
namespace unit_models_deepseek_v3_deepseek_v3_test {

void check_deepseek_v3_tiny(torch::ScalarType dtype, const testing::MoeTolerances& tol) {
  auto model = testing::check_moe_parity("deepseek_v3_tiny", dtype, tol);
  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  const auto& args = transformer.args();
  ASSERT_TRUE(args.mla && args.moe);
  EXPECT_EQ(args.mla->q_lora_rank, 48);
  EXPECT_EQ(args.moe->num_expert_groups, 4);
  EXPECT_EQ(args.moe->route_scale, 2.5);
  EXPECT_EQ(args.n_dense_layers, 1);
  // The stored correction biases were loaded (they change 15 of the 36 routing decisions).
  auto* moe = transformer.blocks()[1].module->feed_forward->as<models::MoEImpl>();
  EXPECT_NEAR(moe->expert_bias[6].item<double>(), 0.303651, 1e-6);
  const auto expected = testing::load_expected("deepseek_v3_tiny");
  auto inv_freq =
      torch::tensor(expected["rope"]["inv_freq"].get<std::vector<double>>(), torch::kFloat64);
  EXPECT_LE(((transformer.inv_freq() - inv_freq).abs() / inv_freq).max().item<double>(), 1e-12);
}

TEST(DeepseekV3Parity, DeepseekV3TinyFloat32) {
  check_deepseek_v3_tiny(torch::kFloat32, {1e-4, 1e-5, 1e-5});
}
TEST(DeepseekV3Parity, DeepseekV3TinyFloat64) {
  check_deepseek_v3_tiny(torch::kFloat64, {5.1e-9, 1e-10, 1e-12});
}

// MLA without a q latent (the debug and 16B flavors) against attention computed head by head
// and query by query in float64 from the same weights.
TEST(MultiHeadLatentAttention, WithoutQueryLatentMatchesALoop) {
  torch::manual_seed(11);
  models::MLAArgs m;
  m.kv_lora_rank = 6;
  m.qk_nope_head_dim = 4;
  m.qk_rope_head_dim = 4;
  m.v_head_dim = 3;
  const int64_t dim = 10, H = 2, S = 5;
  const double scale = 0.37;
  models::MultiHeadLatentAttention mla(dim, H, m, scale,
                                       torch::TensorOptions().dtype(torch::kFloat64));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : mla->parameters()) p.normal_(0.0, 0.4);
  }
  auto x = torch::randn({1, S, dim}, torch::kFloat64);
  const auto inv_freq = models::rope_inv_freq({4, 10000.0, std::nullopt, std::nullopt});
  auto [cos, sin] = models::rope_cos_sin(inv_freq, S, torch::kFloat64, torch::kCPU);
  auto y = mla->forward(x, cos, sin)[0];  // [S, dim]

  auto rotate = [&](torch::Tensor u, int64_t t) {  // u: [4], pairs (0, 1), (2, 3)
    auto out = u.clone();
    for (int64_t i = 0; i < 2; ++i) {
      const double a = t * inv_freq[i].item<double>();
      out[2 * i] = u[2 * i] * std::cos(a) - u[2 * i + 1] * std::sin(a);
      out[2 * i + 1] = u[2 * i + 1] * std::cos(a) + u[2 * i] * std::sin(a);
    }
    return out;
  };
  std::vector<torch::Tensor> q(S), k(S), v(S);  // per position: [H, 8], [H, 8], [H, 3]
  for (int64_t t = 0; t < S; ++t) {
    auto xt = x[0][t];
    auto qt = torch::mv(mla->wq->weight, xt).view({H, 8});
    auto latent = torch::mv(mla->wkv_a->weight, xt);  // [6 + 4]
    auto c = latent.narrow(0, 0, 6);
    c = c / torch::sqrt(c.pow(2).mean() + m.latent_norm_eps) * mla->kv_norm->weight;
    auto kv = torch::mv(mla->wkv_b->weight, c).view({H, 7});
    auto k_rope = rotate(latent.narrow(0, 6, 4), t);
    std::vector<torch::Tensor> qh, kh;
    for (int64_t h = 0; h < H; ++h) {
      qh.push_back(torch::cat({qt[h].narrow(0, 0, 4), rotate(qt[h].narrow(0, 4, 4), t)}));
      kh.push_back(torch::cat({kv[h].narrow(0, 0, 4), k_rope}));
    }
    q[t] = torch::stack(qh);
    k[t] = torch::stack(kh);
    v[t] = kv.narrow(1, 4, 3);
  }
  double err = 0.0;
  for (int64_t t = 0; t < S; ++t) {
    std::vector<torch::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> scores;
      for (int64_t j = 0; j <= t; ++j)
        scores.push_back((q[t][h] * k[j][h]).sum().item<double>() * scale);
      const double top = *std::max_element(scores.begin(), scores.end());
      double denom = 0.0;
      for (double sc : scores) denom += std::exp(sc - top);
      auto o = torch::zeros({3}, torch::kFloat64);
      for (int64_t j = 0; j <= t; ++j) o += std::exp(scores[j] - top) / denom * v[j][h];
      heads.push_back(o);
    }
    auto want = torch::mv(mla->wo->weight, torch::cat(heads));  // [dim]
    err = std::max(err, (y[t] - want).abs().max().item<double>());
  }
  EXPECT_LE(err, 1e-12);
}

// YaRN by the formula in double arithmetic: DeepSeek's correction range and ramp, and the
// softmax scale qk_head_dim^-0.5 (0.1 mscale ln 40 + 1)^2.
TEST(Yarn, FrequenciesAndSoftmaxScaleFollowTheFormula) {
  const models::YarnScaling y{40.0, 32.0, 1.0, 4096};
  const auto freqs = models::rope_inv_freq({64, 10000.0, std::nullopt, y});
  auto correction = [](double r) {
    return 64 * std::log(4096 / (r * 2 * M_PI)) / (2 * std::log(10000.0));
  };
  const double low = std::max(std::floor(correction(32.0)), 0.0);
  const double high = std::min(std::ceil(correction(1.0)), 63.0);
  double err = 0.0;
  for (int64_t i = 0; i < 32; ++i) {
    const double f = std::pow(10000.0, -2.0 * i / 64);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    err = std::max(err, std::abs(freqs[i].item<double>() - (f / 40 * ramp + f * (1 - ramp))) / f);
  }
  EXPECT_LE(err, 1e-14);
  EXPECT_LT(freqs[31].item<double>(), std::pow(10000.0, -62.0 / 64) / 39);  // interpolated
  EXPECT_DOUBLE_EQ(freqs[0].item<double>(), 1.0);                           // extrapolated
  models::MLAArgs m;
  m.mscale = 0.7;
  const double mscale = 0.1 * 0.7 * std::log(40.0) + 1.0;
  EXPECT_DOUBLE_EQ(m.softmax_scale(y), mscale * mscale / std::sqrt(192.0));
  EXPECT_DOUBLE_EQ(m.softmax_scale(std::nullopt), 1.0 / std::sqrt(192.0));
}

TEST(DeepseekV3Flavors, SizesCountEveryExpertAndFlopsTheActiveOnes) {
  const auto& spec = protocols::get_train_spec("deepseek_v3");
  EXPECT_EQ(spec.flavors, (std::vector<std::string>{"debugmodel", "16B", "236B", "671B"}));
  // DeepSeek-V3 671B: 671B parameters in all, 37B active (the technical report's counts,
  // without the multi-token-prediction module).
  auto big = spec.build_on_device("671B", torch::kMeta);
  EXPECT_NEAR(double(big->num_params()) / 1e9, 671.0, 1.0);
  auto debug = spec.build_on_device("debugmodel", torch::kMeta);
  EXPECT_EQ(debug->blocks().size(), 6u);
  EXPECT_EQ(debug->blocks()[0].module->feed_forward->as<models::MoEImpl>(), nullptr);  // dense
  auto* moe = debug->blocks()[1].module->feed_forward->as<models::MoEImpl>();
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->args.top_k, 3);
  EXPECT_EQ(moe->shared_experts->w1->weight.size(0), 512);  // 2 shared experts of width 256
}

}  // namespace unit_models_deepseek_v3_deepseek_v3_test
}  // namespace titan
