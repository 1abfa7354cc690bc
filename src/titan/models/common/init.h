// Seeded parameter initialisation, one rule per parameter (TorchTitan's init_weights), drawn
// the same way whatever part of the parameter a rank holds. Every parameter has its own CPU
// generator seeded from training.seed and its fully qualified name, and its values are drawn
// row-major over the whole (unsharded) tensor in row chunks: a rank that holds rows [r0, r1)
// draws rows [0, r1) chunk by chunk and keeps its own, so the full weights are bit-identical
// under every layout while no rank ever holds more than its rows plus one chunk, and a rank
// draws nothing for a parameter it does not hold.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

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

/// A CPU generator (mt19937, like torch.manual_seed on the CPU) seeded with `seed`; also used
/// for sampling in generate.h.
at::Generator seeded_generator(uint64_t seed);

/// Fills `rows` [n, ...] (any device and dtype) with rows [row_offset, row_offset + n) of the
/// parameter `name` initialised by `rule` from training seed `seed`.
/// Truncated normals use inverse-CDF sampling as nn.init.trunc_normal_ does. Throws
/// std::invalid_argument naming the parameter if its rule is unset. Does not record autograd.
void init_rows(const torch::Tensor& rows, int64_t row_offset, const std::string& name,
               const InitRule& rule, uint64_t seed);

}  // namespace titan::models
