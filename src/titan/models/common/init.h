// Seeded parameter initialisation, one rule per parameter (TorchTitan's init_weights), drawn
// the same way whatever part of the parameter a rank holds. Element i (row-major in the whole,
// unsharded parameter) of parameter `name` is a pure function of (training.seed, name, i): a
// counter-based generator (Philox4x32-10, Salmon et al. 2011, "Parallel Random Numbers: As Easy
// as 1, 2, 3") gives its uniform, and the inverse normal CDF its value. So the full weights are
// bit-identical under every layout and on every device, a rank draws exactly the elements it
// holds (setup time and memory scale with its shard: its pieces plus one chunk), and nothing
// for a parameter it does not hold.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>

namespace titan::models {

/// How a parameter is initialised: ones (norms), or N(mean, std^2) restricted to the absolute
/// interval [a, b] (PyTorch's nn.init.trunc_normal_; a plain normal is [mean -+ 10 std]).
struct InitRule {
  enum class Kind { Unset, Ones, TruncNormal };
  Kind kind = Kind::Unset;
  double mean = 0, std = 0, a = 0, b = 0;

  static InitRule ones() { return {Kind::Ones}; }
  static InitRule normal(double mean, double std) {
    return {Kind::TruncNormal, mean, std, mean - 10 * std, mean + 10 * std};
  }
  static InitRule trunc_normal(double mean, double std, double a, double b) {
    return {Kind::TruncNormal, mean, std, a, b};
  }
};

/// Philox4x32-10 of counter `ctr` under `key` (Random123's philox4x32, 10 rounds).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);

/// A CPU generator (mt19937, like torch.manual_seed on the CPU) seeded with `seed`, for
/// sampling in generate.h.
at::Generator seeded_generator(uint64_t seed);

/// Fills `rows` [n, ...] (any device and dtype) with rows [row_offset, row_offset + n) of the
/// parameter `name` initialised by `rule` from training seed `seed`.
/// Truncated normals use inverse-CDF sampling as nn.init.trunc_normal_ does. `rows` must be
/// contiguous. Throws
/// std::invalid_argument naming the parameter if its rule is unset. Does not record autograd.
void init_rows(const torch::Tensor& rows, int64_t row_offset, const std::string& name,
               const InitRule& rule, uint64_t seed);

}  // namespace titan::models
