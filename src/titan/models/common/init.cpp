#include "titan/models/common/init.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
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

// Uniforms in (0, 1) for elements [first, first + n) of the stream `key`, into out[0, n):
// element i is a pure function of (key, i), so any slice is drawn without the rest. Two
// elements share one Philox block (53 bits each from two 32-bit words).
void fill_uniform(double* out, int64_t first, int64_t n, uint64_t key) {
  at::parallel_for(0, n, int64_t{1} << 14, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const auto i = static_cast<uint64_t>(first + j);
      const auto block = philox4x32_10(
          {static_cast<uint32_t>(i >> 1), static_cast<uint32_t>(i >> 33), 0, 0},
          {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
      const uint32_t a = block[(i & 1) * 2], b = block[(i & 1) * 2 + 1];
      const uint64_t bits = (uint64_t{a >> 5} << 26) | (b >> 6);  // 53 bits
      out[j] = (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
    }
  });
}

// `rule`'s values for elements [first, first + n) of the parameter: [n] float64.
torch::Tensor draw_values(const InitRule& r, int64_t first, int64_t n, uint64_t key) {
  const double lo = normal_cdf((r.a - r.mean) / r.std);
  const double hi = normal_cdf((r.b - r.mean) / r.std);
  auto values = torch::empty({n}, torch::kFloat64);  // values: [n]
  fill_uniform(values.data_ptr<double>(), first, n, key);
  values.mul_(2.0 * (hi - lo)).add_(2.0 * lo - 1.0);  // uniform on (2 lo - 1, 2 hi - 1)
  return values.erfinv_().mul_(r.std * std::sqrt(2.0)).add_(r.mean).clamp_(r.a, r.b);
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    const uint64_t p0 = uint64_t{0xD2511F53u} * ctr[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

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
  const int64_t total = n * row_numel;
  const uint64_t key = parameter_seed(seed, name);
  if (!rows.is_contiguous()) {
    throw std::invalid_argument("init_rows: the piece of '" + name + "' is not contiguous");
  }
  auto flat = rows.view({total});  // flat: [n * row_numel]
  for (int64_t start = 0; start < total; start += kChunkElements) {
    const int64_t count = std::min(kChunkElements, total - start);
    const int64_t first = row_offset * row_numel + start;  // element index in the whole parameter
    flat.narrow(0, start, count).copy_(draw_values(rule, first, count, key));
  }
}

}  // namespace titan::models
