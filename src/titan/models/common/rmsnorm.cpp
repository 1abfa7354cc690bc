#include "titan/models/common/rmsnorm.h"

namespace titan::models {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options)
    : eps(eps) {
  weight = register_parameter("weight", torch::ones({dim}, options));
  init = InitRule::ones();
}

namespace {

// x: [..., dim], weight: [dim] -> [..., dim] in x's dtype.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const auto dtype = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto xf = x.to(dtype);                                                    // xf: [..., dim]
  auto inv_rms = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);  // inv_rms: [..., 1]
  return (xf * inv_rms * weight.to(dtype)).to(x.scalar_type());             // [..., dim]
}

}  // namespace

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return compute({x, weight}, [eps = eps](const std::vector<torch::Tensor>& in) {
    return rms_norm(in[0], in[1], eps);
  });
}

}  // namespace titan::models
