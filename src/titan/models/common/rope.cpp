#include "titan/models/common/rope.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "titan/errors.h"

namespace titan::models {
namespace {

// YaRN's frequencies (rope.h, YarnScaling) from the unscaled ones [Dh/2].
torch::Tensor yarn_scaled(const torch::Tensor& inv_freq, const RopeOptions& options) {
  const YarnScaling& y = *options.yarn;
  if (options.scaling || !(y.factor >= 1.0) || !(y.beta_fast > y.beta_slow) ||
      !(y.beta_slow > 0.0) || y.original_max_position_embeddings <= 0) {
    throw ConfigError(fmt::format(
        "yarn rope_scaling needs factor >= 1, beta_fast > beta_slow > 0, "
        "original_max_position_embeddings > 0 and no llama3 scaling; got factor {}, beta_fast {}, "
        "beta_slow {}, original_max_position_embeddings {}",
        y.factor, y.beta_fast, y.beta_slow, y.original_max_position_embeddings));
  }
  const double dim = double(options.head_dim);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(double(y.original_max_position_embeddings) / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(options.theta));
  };
  const double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow)), dim - 1.0);
  if (low == high) high += 0.001;
  auto ramp = ((torch::arange(inv_freq.size(0), inv_freq.options()) - low) / (high - low))
                  .clamp(0.0, 1.0);                             // ramp: [Dh/2]
  return inv_freq / y.factor * ramp + inv_freq * (1.0 - ramp);  // [Dh/2]
}

}  // namespace

torch::Tensor rope_inv_freq(const RopeOptions& options) {
  if (options.head_dim <= 0 || options.head_dim % 2 != 0) {
    throw ConfigError(fmt::format("RoPE head_dim must be a positive even number, got {}",
                                  options.head_dim));
  }
  if (!(options.theta > 0.0)) {
    throw ConfigError(fmt::format("RoPE theta (rope_theta) must be positive, got {}",
                                  options.theta));
  }
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto exponents = torch::arange(0, options.head_dim, 2, f64) / double(options.head_dim);  // [Dh/2]
  auto inv_freq = torch::pow(options.theta, -exponents);  // inv_freq: [Dh/2]
  if (options.yarn) return yarn_scaled(inv_freq, options);
  if (!options.scaling) {
    return inv_freq;
  }
  const RopeScaling& s = *options.scaling;
  if (!(s.factor > 0.0) || !(s.high_freq_factor > s.low_freq_factor) ||
      s.original_max_position_embeddings <= 0) {
    throw ConfigError(fmt::format(
        "llama3 rope_scaling needs factor > 0, high_freq_factor > low_freq_factor and "
        "original_max_position_embeddings > 0; got factor {}, low_freq_factor {}, "
        "high_freq_factor {}, original_max_position_embeddings {}",
        s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings));
  }
  const double original = double(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  auto wavelen = (2.0 * M_PI) / inv_freq;  // wavelen: [Dh/2]
  auto smooth = (original / wavelen - s.low_freq_factor) /
                (s.high_freq_factor - s.low_freq_factor);  // smooth: [Dh/2]
  auto interpolated = (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;  // [Dh/2]
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor,
                             torch::where(wavelen < high_freq_wavelen, inv_freq,
                                          interpolated));  // scaled: [Dh/2]
  return scaled;
}

std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& inv_freq,
                                                     int64_t seq_len, torch::ScalarType dtype,
                                                     torch::Device device) {
  return rope_cos_sin(inv_freq, torch::arange(seq_len, torch::kInt64), dtype, device);
}

std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& inv_freq,
                                                     const torch::Tensor& positions,
                                                     torch::ScalarType dtype, torch::Device device) {
  auto angles = torch::outer(positions.to(inv_freq.options()), inv_freq);  // angles: [S, Dh/2]
  auto full = torch::cat({angles, angles}, -1);                             // full: [S, Dh]
  return {full.cos().to(device, dtype), full.sin().to(device, dtype)};      // each [S, Dh]
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto xc = x.to(cos.scalar_type());                                           // xc: [B, S, H, Dh]
  auto rotated = torch::cat({-xc.narrow(-1, half, half), xc.narrow(-1, 0, half)}, -1);  // [B, S, H, Dh]
  auto c = cos.unsqueeze(1);                                                   // c: [S, 1, Dh]
  auto s = sin.unsqueeze(1);                                                   // s: [S, 1, Dh]
  return (xc * c + rotated * s).to(x.scalar_type());                           // [B, S, H, Dh]
}

torch::Tensor apply_rope_interleaved(const torch::Tensor& x, const torch::Tensor& cos,
                                     const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto pairs = x.to(cos.scalar_type()).unflatten(-1, {half, 2});  // pairs: [B, S, H, Dh/2, 2]
  auto a = pairs.select(-1, 0), b = pairs.select(-1, 1);          // each [B, S, H, Dh/2]
  auto c = cos.narrow(-1, 0, half).unsqueeze(1);                  // c: [S, 1, Dh/2]
  auto s = sin.narrow(-1, 0, half).unsqueeze(1);                  // s: [S, 1, Dh/2]
  return torch::stack({a * c - b * s, b * c + a * s}, -1).flatten(-2).to(x.scalar_type());
}

}  // namespace titan::models
