#include "titan/platform/cpu_peak.h"

#include <algorithm>

#include "titan/platform/blas.h"
#include "titan/platform/logging.h"

namespace titan::platform {

CpuPeak::CpuPeak(torch::ScalarType compute_dtype)
    : per_thread_(measure_gemm_flops_per_thread(torch::kFloat)) {
  if (compute_dtype != torch::kFloat) {
    per_thread_ = std::max(per_thread_, measure_gemm_flops_per_thread(compute_dtype));
  }
}

double CpuPeak::peak(int threads, double achieved) {
  threads = std::max(threads, 1);
  if (achieved > per_thread_ * threads) {
    if (!raised_) {
      log::warn("The steps ran at {:.3e} FLOP/s on {} thread(s), above the peak measured at start "
                "({:.3e} per thread; other processes were using the cores then): the peak for "
                "MFU is raised to match",
                achieved, threads, per_thread_);
    }
    raised_ = true;
    per_thread_ = achieved / threads;
  }
  return per_thread_ * threads;
}

}  // namespace titan::platform
