// What LibTorch's CPU GEMMs run on, for the start-up log and the run manifest. PyTorch's wheel
// links Intel oneMKL into LibTorch (oneDNN for bfloat16) and picks ATen's vector kernels for
// the CPU at run time (DESIGN.md section 3: an unoptimized BLAS is a 10x slower run).
#pragma once

#include <torch/torch.h>

#include <string>

namespace titan::platform {

struct BlasInfo {
  std::string library;  // e.g. "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product ..."
  std::string kernels;  // ATen's CPU capability in use, e.g. "AVX512"
  bool optimized = false;  // LibTorch was built with an optimized BLAS (MKL, OpenBLAS, ...)
};

/// Describes the BLAS LibTorch uses, from its build configuration.
BlasInfo blas_info();

/// The value of one of LibTorch's build settings (at::show_config(): "BLAS_INFO",
/// "CUDA_VERSION", "CUDNN_VERSION", ...); empty when it is not set.
std::string libtorch_build_setting(const std::string& name);

/// Measured GEMM throughput in FLOP/s for `dtype` on the current thread count (square n x n
/// matmuls, best of a few repetitions). Used as the CPU peak for MFU.
double measure_gemm_flops(torch::ScalarType dtype, int64_t n = 1024);

}  // namespace titan::platform
