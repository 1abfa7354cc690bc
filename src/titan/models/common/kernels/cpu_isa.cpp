#include "titan/models/common/kernels/cpu_isa.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cstdlib>

#include "titan/errors.h"

namespace titan::models::kernels {
namespace {

constexpr int kUndecided = -1;
std::atomic<int> chosen{kUndecided};
std::atomic<bool> from_env{false};

bool runs(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return __builtin_cpu_supports("x86-64-v4");
    case CpuIsa::kAvx2: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::kBaseline: return true;
  }
  return false;
}

CpuIsa checked(CpuIsa isa, const std::string& why) {
  if (!runs(isa)) {
    throw ConfigError(fmt::format("{}: this CPU cannot run the {} kernels (it runs: {})", why,
                                  isa_name(isa), isa_name(supported_isas().back())));
  }
  return isa;
}

CpuIsa decide() {
  const char* env = std::getenv("TITAN_KERNEL_ISA");
  if (env == nullptr || *env == '\0') return supported_isas().back();
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (std::string(env) == isa_name(isa)) {
      from_env = true;
      return checked(isa, fmt::format("TITAN_KERNEL_ISA={}", env));
    }
  }
  throw ConfigError(fmt::format("TITAN_KERNEL_ISA='{}' is not a kernel variant (baseline, avx2, "
                                "avx512)",
                                env));
}

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kBaseline: return "baseline";
  }
  return "?";
}

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (runs(isa)) out.push_back(isa);
  }
  return out;
}

CpuIsa kernel_isa() {
  int isa = chosen.load(std::memory_order_relaxed);
  if (isa == kUndecided) {
    isa = static_cast<int>(decide());
    chosen.store(isa);
  }
  return static_cast<CpuIsa>(isa);
}

void set_kernel_isa(CpuIsa isa) {
  chosen.store(static_cast<int>(checked(isa, "set_kernel_isa")));
}

std::string describe_kernel_isa() {
  const CpuIsa isa = kernel_isa();
  static const char* const kWhat[] = {"x86-64 SSE2", "x86-64-v3: AVX2 + FMA",
                                      "x86-64-v4: AVX-512"};
  std::vector<std::string> names;
  for (CpuIsa i : supported_isas()) names.push_back(isa_name(i));
  return fmt::format("compile mode's vectorised kernels run the {} variant ({}; {})",
                     isa_name(isa), kWhat[static_cast<int>(isa)],
                     from_env ? std::string("set by TITAN_KERNEL_ISA")
                              : fmt::format("the best of {} this CPU runs", fmt::join(names, ", ")));
}

}  // namespace titan::models::kernels
