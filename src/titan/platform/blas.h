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

/// One thread's GEMM throughput in FLOP/s for `dtype`: square matmuls, n doubling from 128 while
/// a product takes under 20 ms (up to 1024), best of 3 at the last size; a fraction of a second
/// whatever the dtype's speed (bf16 without bf16 units is ~100x slower than fp32).
double measure_gemm_flops_per_thread(torch::ScalarType dtype);

}  // namespace titan::platform
