// RoPE: frequencies (plain and Llama 3.1 "llama3" scaling) against the float64 tables of
// llama3_tiny / qwen3_tiny expected.json and a scalar recomputation; rotation against the
// per-pair formula of the rotate_half layout.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "titan/errors.h"
#include "titan/models/common/rope.h"

namespace titan::models {
namespace unit_models_common_rope_test {

std::vector<double> expected_inv_freq(const std::string& model) {
  std::ifstream in(std::string(TITAN_SHARED_DATA) + "/models/" + model + "/expected.json");
  return nlohmann::json::parse(in)["rope"]["inv_freq"].get<std::vector<double>>();
}

double max_rel_err(const torch::Tensor& got, const std::vector<double>& want) {
  EXPECT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  double err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i].item<double>() - want[i]) / std::abs(want[i]));
  }
  return err;
}

TEST(Rope, Llama3ScalingMatchesLlama3Tiny) {
  RopeOptions o{32, 500000.0, RopeScaling{8.0, 1.0, 4.0, 8192}, std::nullopt};
  auto f = rope_inv_freq(o);
  EXPECT_EQ(f.scalar_type(), torch::kFloat64);
  const double err = max_rel_err(f, expected_inv_freq("llama3_tiny"));
  std::cout << "[measured] llama3_tiny inv_freq max rel err: " << err << "\n";
  EXPECT_LE(err, 1e-6);
  EXPECT_LE(err, 1e-14);  // float64 throughout
}

TEST(Rope, PlainFrequenciesMatchQwen3Tiny) {
  const double err = max_rel_err(rope_inv_freq({64, 1e6, std::nullopt, std::nullopt}), expected_inv_freq("qwen3_tiny"));
  std::cout << "[measured] qwen3_tiny inv_freq max rel err: " << err << "\n";
  EXPECT_LE(err, 1e-14);
}

// The three bands of the scaling, recomputed from HF's _compute_llama3_parameters by hand.
TEST(Rope, Llama3ScalingBands) {
  const RopeScaling s{32.0, 1.0, 4.0, 8192};
  auto f = rope_inv_freq({64, 500000.0, s, std::nullopt});
  for (int64_t i = 0; i < 32; ++i) {
    const double base = std::pow(500000.0, -2.0 * i / 64.0);
    const double wavelen = 2 * M_PI / base;
    double want;
    if (wavelen < 8192.0 / 4.0) {
      want = base;
    } else if (wavelen > 8192.0 / 1.0) {
      want = base / 32.0;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * base / 32.0 + smooth * base;
    }
    EXPECT_NEAR(f[i].item<double>() / want, 1.0, 1e-14) << "i = " << i;
  }
}

TEST(Rope, ApplyMatchesPairFormula) {
  torch::manual_seed(3);
  const int64_t B = 2, S = 5, H = 3, Dh = 8, half = Dh / 2;
  auto f = rope_inv_freq({Dh, 10000.0, std::nullopt, std::nullopt});
  auto [cos, sin] = rope_cos_sin(f, S, torch::kFloat64, torch::kCPU);
  EXPECT_EQ(cos.sizes(), (std::vector<int64_t>{S, Dh}));
  auto x = torch::randn({B, S, H, Dh}, torch::kFloat64);
  auto y = apply_rope(x, cos, sin);
  double err = 0.0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          const double a = t * f[i].item<double>();
          const double lo = x[b][t][h][i].item<double>(), hi = x[b][t][h][i + half].item<double>();
          err = std::max(err, std::abs(y[b][t][h][i].item<double>() -
                                       (lo * std::cos(a) - hi * std::sin(a))));
          err = std::max(err, std::abs(y[b][t][h][i + half].item<double>() -
                                       (hi * std::cos(a) + lo * std::sin(a))));
        }
      }
    }
  }
  EXPECT_LE(err, 1e-14);
}

TEST(Rope, Float32AnglesComeFromFloat64) {
  // At position 100000 a float32 angle product would be off by ~4e-3 rad; ours is rounded once.
  auto f = rope_inv_freq({4, 10000.0, std::nullopt, std::nullopt});
  auto [cos, sin] = rope_cos_sin(f, 100001, torch::kFloat32, torch::kCPU);
  const double a = 100000.0 * f[0].item<double>();
  EXPECT_NEAR(cos[100000][0].item<double>(), std::cos(a), 1e-7);
  EXPECT_NEAR(sin[100000][1].item<double>(), std::sin(100000.0 * f[1].item<double>()), 1e-7);
}

TEST(Rope, RejectsOddHeadDim) {
  EXPECT_THROW(rope_inv_freq({7, 10000.0, std::nullopt, std::nullopt}), ConfigError);
}

}  // namespace unit_models_common_rope_test
}  // namespace titan::models
