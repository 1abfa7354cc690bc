// Rotary position embedding (Su et al. 2021, "RoFormer", arXiv:2104.09864) in Hugging Face's
// rotate_half layout: dimension i of a head is paired with i + head_dim/2 (not 2i with 2i+1 as
// in Meta's original code), so Hugging Face q/k weights load without any permutation.
// Optional Llama 3.1 frequency scaling (rope_type "llama3", HF _compute_llama3_parameters) or
// YaRN's (Peng et al. 2023, arXiv:2309.00071; DeepSeek-V3). DeepSeek-V3's attention rotates
// adjacent pairs (2i, 2i+1) instead (apply_rope_interleaved), as its weights are stored.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <utility>

namespace titan::models {

/// Llama 3.1 "llama3" RoPE scaling: frequencies whose wavelength exceeds
/// original_max_position_embeddings / low_freq_factor are divided by `factor`, those below
/// original / high_freq_factor are kept, and the band between is interpolated smoothly.
struct RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

/// YaRN "NTK-by-parts" scaling (HF rope_type "yarn", DeepSeek's): with the correction range
/// low = floor(d(beta_fast)), high = ceil(d(beta_slow)), d(r) = head_dim ln(original / (2 pi r))
/// / (2 ln theta), clamped to [0, head_dim - 1], and ramp_i = clamp((i - low) / (high - low),
/// 0, 1): f_i' = f_i / factor * ramp_i + f_i (1 - ramp_i). The attention's softmax scale
/// carries YaRN's mscale (mla.h); the rotation itself is not scaled.
struct YarnScaling {
  double factor = 40.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 4096;
};

struct RopeOptions {
  int64_t head_dim = 0;  // even
  double theta = 10000.0;
  std::optional<RopeScaling> scaling;
  std::optional<YarnScaling> yarn;  // at most one of scaling and yarn
};

/// Frequencies f_i = theta^(-2i/head_dim), i < head_dim/2, then scaled if options.scaling or
/// options.yarn is set. Returns [head_dim/2] float64 on the CPU (computed entirely in float64).
/// Throws ConfigError if head_dim is odd or not positive, theta <= 0, or a scaling is invalid.
torch::Tensor rope_inv_freq(const RopeOptions& options);

/// cos and sin of the angles pos * f_i for positions 0..seq_len-1, each [seq_len, head_dim]
/// (the head_dim/2 angles repeated for both halves), computed in float64 and then cast to
/// `dtype` on `device`. inv_freq: [head_dim/2] float64 (rope_inv_freq).
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& inv_freq,
                                                     int64_t seq_len, torch::ScalarType dtype,
                                                     torch::Device device);
/// As above for the given positions [S] (int64): a rank's chunks under context parallelism.
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const torch::Tensor& inv_freq,
                                                     const torch::Tensor& positions,
                                                     torch::ScalarType dtype, torch::Device device);

/// Rotates x: [B, S, H, Dh] by the angles of its positions: x * cos + rotate_half(x) * sin,
/// rotate_half(x) = cat(-x[..., Dh/2:], x[..., :Dh/2]). cos, sin: [S, Dh] (rope_cos_sin).
/// Computed in cos's dtype, returned in x's dtype.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

/// Rotates x: [B, S, H, Dh] pair by pair (Meta's and DeepSeek's layout): (x[2i], x[2i+1]) by
/// the angle pos f_i. cos, sin: [S, Dh] (rope_cos_sin; the first Dh/2 columns are used).
/// Computed in cos's dtype, returned in x's dtype.
torch::Tensor apply_rope_interleaved(const torch::Tensor& x, const torch::Tensor& cos,
                                     const torch::Tensor& sin);

}  // namespace titan::models
