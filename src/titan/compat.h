// The one place that knows which LibTorch we build against: Debian's 1.13 (CPU, Gloo) or a
// pip PyTorch 2.x (CUDA, NCCL). Everything version-dependent goes through here.
#pragma once

#include <torch/version.h>

#define TITAN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace titan::compat {

/// True when the collectives backend has native reduce-scatter / all-gather-into-tensor and
/// accepts bfloat16 (NCCL on 2.x); Gloo in 1.13 has neither (DESIGN.md section 3).
constexpr bool kTorch2 = TITAN_TORCH_AT_LEAST(2, 0);

/// LibTorch version as "major.minor.patch".
inline const char* torch_version() { return TORCH_VERSION; }

}  // namespace titan::compat
