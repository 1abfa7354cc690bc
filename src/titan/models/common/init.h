// Seeded random initialisers for model parameters. Values are drawn on the CPU in float32 from
// a generator the caller owns, then copied into the parameter (any device or dtype), so a seed
// gives the same weights on every device and in every parallel layout.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdint>

namespace titan::models {

/// A CPU generator (mt19937, like torch.manual_seed on the CPU) seeded with `seed`; also used
/// for sampling in generate.h.
at::Generator seeded_generator(uint64_t seed);

/// Fills `param` with N(mean, std^2) draws (PyTorch's nn.init.normal_). Does not record autograd.
void init_normal_(const torch::Tensor& param, double mean, double std, at::Generator& gen);

/// Fills `param` with N(mean, std^2) restricted to the absolute interval [a, b], by inverse-CDF
/// sampling exactly as PyTorch's nn.init.trunc_normal_ does (a, b are values, not multiples of
/// std). Does not record autograd.
void init_trunc_normal_(const torch::Tensor& param, double mean, double std, double a, double b,
                        at::Generator& gen);

}  // namespace titan::models
