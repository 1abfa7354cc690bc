#include "titan/models/common/rope.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"

namespace titan::models {

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
  auto positions = torch::arange(seq_len, inv_freq.options());              // positions: [S]
  auto angles = torch::outer(positions, inv_freq);                          // angles: [S, Dh/2]
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

}  // namespace titan::models
