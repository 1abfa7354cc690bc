#include "titan/models/common/init.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace titan::models {
namespace {

double normal_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

// About 64 MiB of float64 draws per chunk.
constexpr int64_t kChunkElements = int64_t{1} << 23;

// FNV-1a of the name, mixed with the seed: each parameter's own stream.
uint64_t parameter_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The next `count` rows of the parameter's draw sequence: [count, row_numel] float64.
torch::Tensor draw_rows(const InitRule& r, int64_t count, int64_t row_numel, at::Generator& gen) {
  const double lo = normal_cdf((r.a - r.mean) / r.std);
  const double hi = normal_cdf((r.b - r.mean) / r.std);
  auto values = torch::empty({count, row_numel}, torch::kFloat64);  // values: [count, row_numel]
  values.uniform_(2.0 * lo - 1.0, 2.0 * hi - 1.0, gen);
  return values.erfinv_().mul_(r.std * std::sqrt(2.0)).add_(r.mean).clamp_(r.a, r.b);
}

}  // namespace

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

void init_rows(const torch::Tensor& rows, int64_t row_offset, const std::string& name,
               const InitRule& rule, uint64_t seed) {
  torch::NoGradGuard no_grad;
  if (rule.kind == InitRule::Kind::Unset) {
    throw std::invalid_argument("parameter '" + name + "' has no initialisation rule");
  }
  if (rule.kind == InitRule::Kind::Ones) {
    rows.fill_(1.0);
    return;
  }
  const int64_t n = rows.dim() == 0 ? 1 : rows.size(0);
  const int64_t row_numel = n == 0 ? 0 : rows.numel() / n;
  if (n == 0 || row_numel == 0) return;
  auto gen = seeded_generator(parameter_seed(seed, name));
  auto out = rows.view({n, row_numel});  // out: [n, row_numel]
  const int64_t chunk = std::max<int64_t>(1, kChunkElements / row_numel);
  for (int64_t start = 0; start < row_offset + n; start += chunk) {
    const int64_t count = std::min(chunk, row_offset + n - start);
    auto values = draw_rows(rule, count, row_numel, gen);  // rows [start, start + count)
    const int64_t first = std::max(start, row_offset);
    const int64_t last = std::min(start + count, row_offset + n);
    if (first < last) {
      out.narrow(0, first - row_offset, last - first)
          .copy_(values.narrow(0, first - start, last - first));
    }
  }
}

}  // namespace titan::models
