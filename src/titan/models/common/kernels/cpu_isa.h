// The instruction set compile mode's hand-vectorised kernels run (the attention tiles): the
// best this CPU supports, or the one TITAN_KERNEL_ISA names, so that every machine can measure
// every variant it can run (bench/kernels_bench) and the tests check each of them.
#pragma once

#include <string>
#include <vector>

namespace titan::models::kernels {

enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

/// "baseline" (x86-64: SSE2), "avx2" (x86-64-v3: AVX2 + FMA) or "avx512" (x86-64-v4), as
/// TITAN_KERNEL_ISA spells them.
const char* isa_name(CpuIsa isa);

/// The variants this CPU runs, baseline first.
std::vector<CpuIsa> supported_isas();

/// The variant the kernels run: TITAN_KERNEL_ISA when set, else the best of supported_isas().
/// Decided on the first call; throws ConfigError for an unknown TITAN_KERNEL_ISA or one this
/// CPU cannot run.
CpuIsa kernel_isa();

/// Forces `isa` from now on (tests, benchmarks); throws ConfigError when the CPU cannot run it.
void set_kernel_isa(CpuIsa isa);

/// One line for the log: the variant and why it was chosen.
std::string describe_kernel_isa();

}  // namespace titan::models::kernels
