#include "titan/distributed/squared_norm.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

namespace titan::distributed {
namespace {

constexpr int64_t kGrain = int64_t(1) << 16;  // elements per task

// x: [n] -> sum(x^2) in float64
template <typename scalar_t>
double sum_of_squares(const scalar_t* x, int64_t n) {
  return at::parallel_reduce(
      int64_t(0), n, kGrain, 0.0,
      [x](int64_t begin, int64_t end, double partial) {
        for (int64_t i = begin; i < end; ++i) partial += double(x[i]) * double(x[i]);
        return partial;
      },
      [](double a, double b) { return a + b; });
}

}  // namespace

torch::Tensor squared_norm(const torch::Tensor& x_in) {
  if (!x_in.device().is_cpu()) {
    return at::linalg_vector_norm(x_in, 2, {}, false, torch::kDouble).square();
  }
  auto x = x_in.contiguous();
  double sum = 0;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "squared_norm",
                                 [&] { sum = sum_of_squares(x.data_ptr<scalar_t>(), x.numel()); });
  return torch::tensor(sum, x.options().dtype(torch::kDouble));
}

}  // namespace titan::distributed
