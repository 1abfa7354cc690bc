#include "titan/platform/device.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "titan/errors.h"

#ifdef TITAN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace titan::platform {
namespace {

struct PeakRow {
  const char* match;   // a substring of the device name
  double bf16;         // dense BF16/FP16 tensor FLOP/s
  double fp32;         // dense FP32 FLOP/s, 0 when not in the table
};

// Checked in order, so that a longer name comes before its prefix (GB200 before B200, H200
// before H20). GPUs as TorchTitan's get_peak_flops (NVIDIA's and AMD's datasheets, dense);
// Trainium chips from the AWS Neuron architecture pages (trn1: 190 BF16 / 47.5 FP32 TFLOP/s,
// trn2: 667 / 181, trn3: 671 / 183).
const std::vector<PeakRow>& peak_table() {
  static const std::vector<PeakRow> rows = {
      {"A100", 312e12, 0},      {"A6000", 154.85e12, 0},  {"H100 NVL", 835e12, 0},
      {"H100 PCIe", 756e12, 0}, {"H100", 989e12, 0},      {"H200", 989e12, 0},
      {"H20", 148e12, 0},       {"GB200", 2.5e15, 0},     {"GB300", 2.5e15, 0},
      {"B200", 2.25e15, 0},     {"B300", 2.25e15, 0},     {"MI355X", 2500e12, 0},
      {"MI300X", 1300e12, 0},   {"MI325X", 1300e12, 0},   {"MI250X", 191.5e12, 0},
      {"trn1", 190e12, 47.5e12}, {"trn2", 667e12, 181e12}, {"trn3", 671e12, 183e12},
  };
  return rows;
}

}  // namespace

int visible_gpus() {
#ifdef TITAN_CUDA
  return static_cast<int>(torch::cuda::device_count());
#else
  return 0;
#endif
}

torch::Device select_rank_device(int local_rank) {
  const int gpus = visible_gpus();
  if (gpus == 0) return torch::kCPU;
  if (local_rank >= gpus) {
    throw ConfigError(fmt::format("LOCAL_RANK={} but this process sees {} GPU(s): start at most "
                                  "{} ranks per node (NGPU), or check CUDA_VISIBLE_DEVICES",
                                  local_rank, gpus, gpus));
  }
  const torch::Device gpu(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
#ifdef TITAN_CUDA
  c10::cuda::set_device(gpu.index());
#endif
  return gpu;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string model = "unknown CPU";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
      break;
    }
  }
  const char* isa = __builtin_cpu_supports("x86-64-v4")   ? "AVX-512"
                    : __builtin_cpu_supports("x86-64-v3") ? "AVX2"
                                                          : "SSE2";
  return fmt::format("{} ({}, {} cores)", model, isa, std::thread::hardware_concurrency());
}

std::string device_name(const torch::Device& device) {
#ifdef TITAN_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  return "cpu: " + cpu_model();
}

int64_t device_capacity_bytes(const torch::Device& device) {
#ifdef TITAN_CUDA
  if (device.is_cuda()) {
    return static_cast<int64_t>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
  }
#endif
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
}

std::optional<double> accelerator_peak_flops(const std::string& name, torch::ScalarType dtype) {
  for (const auto& row : peak_table()) {
    if (name.find(row.match) == std::string::npos) continue;
    const double peak = dtype == torch::kFloat32 ? row.fp32 : row.bf16;
    if (peak > 0) return peak;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace titan::platform
