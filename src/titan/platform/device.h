// The device a rank computes on and what it is: the GPU LOCAL_RANK selects when LibTorch sees
// GPUs (CUDA), else the CPU; the device's name, and its peak FLOP/s for MFU from the published
// specifications of known accelerators (never a guessed figure).
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace titan::platform {

/// GPUs this process sees (0 on a machine without CUDA devices or drivers).
int visible_gpus();

/// cuda:<local_rank> when GPUs are visible (made the current CUDA device), else the CPU.
/// Throws ConfigError when GPUs are visible but fewer than local_rank + 1 (more ranks on the
/// node than GPUs).
torch::Device select_rank_device(int local_rank);

/// The CPU's model as /proc/cpuinfo names it (e.g. "AMD EPYC 9R14 96-Core Processor"), with
/// its widest vector ISA ("AVX-512", "AVX2" or "SSE2"): every CPU figure names its machine.
std::string cpu_model();

/// "cpu: <cpu_model()>", or the GPU's name as CUDA reports it (e.g. "NVIDIA H200").
std::string device_name(const torch::Device& device);

/// Bytes of memory of `device`: the GPU's, or the machine's RAM for the CPU.
int64_t device_capacity_bytes(const torch::Device& device);

/// Dense peak FLOP/s of the accelerator called `name` (a CUDA device name, or "trn1", "trn2",
/// "trn3") for matmuls in `dtype`, from its vendor's specification; nullopt when the table does
/// not know the device or that precision.
std::optional<double> accelerator_peak_flops(const std::string& name, torch::ScalarType dtype);

}  // namespace titan::platform
