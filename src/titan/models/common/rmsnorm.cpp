#include "titan/models/common/rmsnorm.h"

namespace titan::models {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options)
    : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}, options));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto compute = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto xf = x.to(compute);                                                // xf: [..., dim]
  auto inv_rms = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);  // inv_rms: [..., 1]
  return (xf * inv_rms * weight.to(compute)).to(x.scalar_type());         // [..., dim]
}

void RMSNormImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  weight.fill_(1.0);
}

}  // namespace titan::models
