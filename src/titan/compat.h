// The one place that knows which LibTorch we build against: Debian's 1.13 (CPU, Gloo) or a
// pip PyTorch 2.x (CUDA, NCCL). Everything version-dependent goes through here.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/version.h>
#ifdef TITAN_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#define TITAN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace titan::compat {

/// True on PyTorch 2.x, whose backends have native reduce-scatter / all-gather-into-tensor and
/// (NCCL) accept bfloat16; Gloo in 1.13 has neither (DESIGN.md section 3).
constexpr bool kTorch2 = TITAN_TORCH_AT_LEAST(2, 0);

/// The collectives backend base class: c10d::ProcessGroup in 1.13, c10d::Backend in 2.x.
#if TITAN_TORCH_AT_LEAST(2, 0)
using CommBackend = c10d::Backend;
#else
using CommBackend = c10d::ProcessGroup;
#endif

/// LibTorch version as "major.minor.patch".
inline const char* torch_version() { return TORCH_VERSION; }

}  // namespace titan::compat
