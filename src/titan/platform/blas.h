// Making sure GEMMs run on an optimized BLAS with the right kernels (DESIGN.md section 3):
// Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to SSE3 "Prescott"
// kernels (66 GFLOP/s on 2 threads instead of 343 with OPENBLAS_CORETYPE=SkylakeX).
#pragma once

#include <torch/torch.h>

#include <string>

namespace titan::platform {

/// What BLAS the process runs on.
struct BlasInfo {
  std::string library;   // "OpenBLAS 0.3.21 ...", or "unknown (not OpenBLAS)"
  std::string core;      // OpenBLAS kernel family, e.g. "SkylakeX"; empty if not OpenBLAS
  std::string coretype;  // value of OPENBLAS_CORETYPE, empty if unset
  bool optimized = false;
};

/// Call first in main(). When OpenBLAS fell back to pre-AVX2 kernels on a CPU with AVX-512
/// (F/BW/DQ/VL/CD -> SkylakeX) or AVX2+FMA (-> Haswell), and OPENBLAS_CORETYPE is unset, sets it
/// and re-executes the process (OpenBLAS reads it only when it loads). A value already set is
/// never overridden; TITAN_BLAS_CORETYPE=off disables this.
void ensure_blas_kernels(char** argv);

/// Describes the BLAS in use (OpenBLAS found through dlsym; anything else is "not optimized").
BlasInfo blas_info();

/// Max relative error of a 96x80x72 fp32 GEMM against a float64 reference computed with loops.
/// A correct BLAS gives ~1e-6.
double gemm_check_error();

/// Measured GEMM throughput in FLOP/s for `dtype` on the current thread count (square n x n
/// matmuls, best of a few repetitions). Used as the CPU peak for MFU.
double measure_gemm_flops(torch::ScalarType dtype, int64_t n = 1024);

}  // namespace titan::platform
