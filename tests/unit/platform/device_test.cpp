// The rank's device and what titan says about it: the peak-FLOPS table against the datasheet
// figures it cites (longer names before their prefixes, no figure for a precision the table
// lacks), the CPU fallback when no GPU is visible, and the memory peaks the step line reads.
#include <gtest/gtest.h>

#include "titan/errors.h"
#include "titan/platform/device.h"
#include "titan/platform/memory.h"

namespace titan::platform {
namespace unit_platform_device_test {

TEST(PeakFlops, KnownAcceleratorsByTheirCudaOrNeuronNames) {
  const std::vector<std::pair<std::string, double>> bf16 = {
      {"NVIDIA H200", 989e12},           {"NVIDIA H100 80GB HBM3", 989e12},
      {"NVIDIA H100 PCIe", 756e12},      {"NVIDIA H100 NVL", 835e12},
      {"NVIDIA A100-SXM4-80GB", 312e12}, {"NVIDIA H20", 148e12},
      {"NVIDIA GB200", 2.5e15},          {"NVIDIA B200", 2.25e15},
      {"trn1", 190e12},                  {"trn2", 667e12},
      {"trn3", 671e12},
  };
  for (const auto& [name, peak] : bf16) {
    auto got = accelerator_peak_flops(name, torch::kBFloat16);
    ASSERT_TRUE(got.has_value()) << name;
    EXPECT_DOUBLE_EQ(*got, peak) << name;
  }
  EXPECT_DOUBLE_EQ(*accelerator_peak_flops("trn2", torch::kFloat32), 181e12);
  EXPECT_DOUBLE_EQ(*accelerator_peak_flops("trn3", torch::kFloat32), 183e12);
}

TEST(PeakFlops, UnknownDeviceOrPrecisionHasNoPeak) {
  EXPECT_FALSE(accelerator_peak_flops("NVIDIA GeForce GTX 1080", torch::kBFloat16));
  EXPECT_FALSE(accelerator_peak_flops("cpu", torch::kFloat32));
  // The GPU rows give dense bf16 only: an fp32 run on them gets "mfu: n/a".
  EXPECT_FALSE(accelerator_peak_flops("NVIDIA H200", torch::kFloat32));
}

TEST(RankDevice, CpuWhenNoGpuIsVisibleElseOneGpuPerLocalRank) {
  const int gpus = visible_gpus();
  if (gpus == 0) {
    EXPECT_TRUE(select_rank_device(0).is_cpu());
    EXPECT_TRUE(select_rank_device(7).is_cpu());  // CPU ranks are not bounded by GPUs
    EXPECT_EQ(device_name(torch::kCPU).rfind("cpu: ", 0), 0u);
  } else {
    EXPECT_EQ(select_rank_device(gpus - 1), torch::Device(torch::kCUDA, gpus - 1));
    EXPECT_THROW(select_rank_device(gpus), ConfigError);
  }
  EXPECT_GT(device_capacity_bytes(torch::kCPU), int64_t{1} << 28);
}

TEST(MemoryPeaks, CpuPeakIsTheLargestLiveTensorBytesSinceTheReset) {
  enable_memory_counting();
  reset_memory_peaks(torch::kCPU);
  const int64_t before = live_tensor_bytes();
  {
    auto big = torch::ones({1 << 20});  // 4 MiB, freed at the end of the block
  }
  auto peaks = memory_peaks(torch::kCPU);
  EXPECT_GE(peaks.max_active, before + (int64_t{4} << 20));
  EXPECT_GE(peaks.max_reserved, int64_t{4} << 20);  // the process's peak RSS holds it too
  EXPECT_EQ(peaks.alloc_retries, 0);
  reset_memory_peaks(torch::kCPU);
  EXPECT_LT(memory_peaks(torch::kCPU).max_active, before + (int64_t{4} << 20));
}

}  // namespace unit_platform_device_test
}  // namespace titan::platform
