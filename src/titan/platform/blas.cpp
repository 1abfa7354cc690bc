#include "titan/platform/blas.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>

namespace titan::platform {
namespace {

using CharFn = char* (*)();

std::string call_openblas(const char* symbol) {
  auto fn = reinterpret_cast<CharFn>(dlsym(RTLD_DEFAULT, symbol));
  return fn ? std::string(fn()) : std::string();
}

// Kernels older than AVX2, which a modern x86 CPU should never be running.
bool is_fallback_core(const std::string& core) {
  static const std::set<std::string> old = {"Prescott", "Core2",   "Penryn",  "Dunnington",
                                            "Nehalem",  "Atom",    "Katmai",  "Coppermine",
                                            "Northwood", "Banias", "Sandybridge"};
  return old.count(core) > 0;
}

std::string best_coretype() {
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512cd");
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

}  // namespace

void ensure_blas_kernels(char** argv) {
  const char* off = std::getenv("TITAN_BLAS_CORETYPE");
  if (off && std::string(off) == "off") return;
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  std::string core = call_openblas("openblas_get_corename");
  if (core.empty() || !is_fallback_core(core)) return;
  std::string best = best_coretype();
  if (best.empty()) return;
  setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
  execv("/proc/self/exe", argv);
  // execv only returns on failure: carry on with the slow kernels.
}

BlasInfo blas_info() {
  BlasInfo info;
  info.core = call_openblas("openblas_get_corename");
  std::string config = call_openblas("openblas_get_config");
  info.library = config.empty() ? "unknown (not OpenBLAS)" : config;
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  info.coretype = env ? env : "";
  info.optimized = !info.core.empty() && !is_fallback_core(info.core);
  return info;
}

double gemm_check_error() {
  torch::manual_seed(0);
  auto a = torch::randn({96, 72});
  auto b = torch::randn({72, 80});
  auto c = torch::matmul(a, b);
  auto a64 = a.to(torch::kDouble).contiguous();
  auto b64 = b.to(torch::kDouble).contiguous();
  const double* pa = a64.data_ptr<double>();
  const double* pb = b64.data_ptr<double>();
  auto c32 = c.contiguous();
  const float* pc = c32.data_ptr<float>();
  double worst = 0, scale = 0;
  for (int i = 0; i < 96; ++i) {
    for (int j = 0; j < 80; ++j) {
      double ref = 0;
      for (int k = 0; k < 72; ++k) ref += pa[i * 72 + k] * pb[k * 80 + j];
      worst = std::max(worst, std::abs(ref - pc[i * 80 + j]));
      scale = std::max(scale, std::abs(ref));
    }
  }
  return worst / scale;
}

double measure_gemm_flops(torch::ScalarType dtype, int64_t n) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({n, n}).to(dtype);
  auto b = torch::randn({n, n}).to(dtype);
  auto c = torch::matmul(a, b);  // warm-up
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto start = std::chrono::steady_clock::now();
    torch::matmul_out(c, a, b);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

}  // namespace titan::platform
