#include "titan/platform/blas.h"

#include <ATen/Version.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <limits>
#include <sstream>

namespace titan::platform {
namespace {

// The text after `key` up to the end of its line or the next ", ", trimmed; empty if absent.
std::string config_value(const std::string& config, const std::string& key, bool to_comma) {
  auto at = config.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  auto end = config.find(to_comma ? ", " : "\n", at);
  auto value = config.substr(at, end == std::string::npos ? std::string::npos : end - at);
  while (!value.empty() && (value.back() == ' ' || value.back() == ',')) value.pop_back();
  return value;
}

// The line of at::show_config() that names the BLAS library ("Intel(R) oneAPI Math Kernel
// Library Version ..."), else the build setting BLAS_INFO.
std::string library_line(const std::string& config, const std::string& blas) {
  std::istringstream lines(config);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("Math Kernel Library") != std::string::npos ||
        line.find("OpenBLAS") != std::string::npos) {
      return line.substr(line.find_first_not_of(" -"));
    }
  }
  return blas;
}

}  // namespace

std::string libtorch_build_setting(const std::string& name) {
  return config_value(at::show_config(), name + "=", /*to_comma=*/true);
}

BlasInfo blas_info() {
  const std::string config = at::show_config();
  const std::string blas = config_value(config, "BLAS_INFO=", /*to_comma=*/true);
  BlasInfo info;
  info.library = blas.empty() ? "none (LibTorch built without a BLAS)" : library_line(config, blas);
  info.kernels = config_value(config, "CPU capability usage: ", /*to_comma=*/false);
  info.optimized = !blas.empty() && blas != "generic";
  return info;
}

double measure_gemm_flops_per_thread(torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  double best = 0;
  for (int64_t n = 128;; n *= 2) {
    auto a = torch::randn({n, n}).to(dtype);  // a: [n, n]
    auto b = torch::randn({n, n}).to(dtype);  // b: [n, n]
    auto c = torch::matmul(a, b);             // warm-up; c: [n, n]
    double fastest = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < 3; ++rep) {
      auto start = std::chrono::steady_clock::now();
      torch::matmul_out(c, a, b);
      fastest = std::min(
          fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / fastest);
    if (n >= 1024 || fastest > 0.02) break;
  }
  at::set_num_threads(threads);
  return best;
}

}  // namespace titan::platform
