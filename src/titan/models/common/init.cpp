#include "titan/models/common/init.h"

#include <cmath>

namespace titan::models {
namespace {

double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

void copy_into(const torch::Tensor& param, const torch::Tensor& values) {
  torch::NoGradGuard no_grad;
  param.copy_(values);
}

}  // namespace

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

void init_normal_(const torch::Tensor& param, double mean, double std, at::Generator& gen) {
  auto values = torch::empty(param.sizes(), torch::kFloat32);  // values: param's shape
  values.normal_(mean, std, gen);
  copy_into(param, values);
}

void init_trunc_normal_(const torch::Tensor& param, double mean, double std, double a, double b,
                        at::Generator& gen) {
  const double lo = normal_cdf((a - mean) / std);
  const double hi = normal_cdf((b - mean) / std);
  auto values = torch::empty(param.sizes(), torch::kFloat32);  // values: param's shape
  values.uniform_(2.0 * lo - 1.0, 2.0 * hi - 1.0, gen);
  values.erfinv_().mul_(std * std::sqrt(2.0)).add_(mean).clamp_(a, b);
  copy_into(param, values);
}

}  // namespace titan::models
