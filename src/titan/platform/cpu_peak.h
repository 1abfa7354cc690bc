// The peak FLOP/s that MFU divides by on a CPU, where no datasheet figure applies: one thread's
// best GEMM rate, times the threads the rank computes with. GEMMs scale at most linearly with
// threads, so a step's arithmetic cannot beat it unless the measurement itself was slowed by
// other processes on the cores; a stretch of steps that does beat it raises it, so that MFU
// never exceeds 100%.
#pragma once

#include <torch/torch.h>

namespace titan::platform {

class CpuPeak {
 public:
  /// Measures one thread's GEMM rate (platform/blas.h) in fp32 and in `compute_dtype`, and keeps
  /// the faster: on a CPU without bf16 units a bf16 step runs much of its arithmetic in fp32.
  explicit CpuPeak(torch::ScalarType compute_dtype);

  double per_thread() const { return per_thread_; }

  /// The peak of `threads` threads for steps that ran at `achieved` FLOP/s. When `achieved` is
  /// above threads x per_thread(), per_thread() is raised to achieved / threads first, with a
  /// warning the first time.
  double peak(int threads, double achieved);

 private:
  double per_thread_;
  bool raised_ = false;
};

}  // namespace titan::platform
