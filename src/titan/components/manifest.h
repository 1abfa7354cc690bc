// run_manifest.json: what a run needs to be reproduced and compared (DESIGN.md "Outputs"):
// exact versions, the resolved config, the world layout, and the data with sizes and hashes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace titan {
/// Git revision of the titan sources this binary was built from (generated at build time).
const char* git_revision();
}  // namespace titan

namespace titan::components {

/// titan revision, LibTorch, compiler, BLAS (library, kernels), the CUDA and NCCL versions
/// LibTorch was built with (when it has CUDA), OS and host.
nlohmann::json environment_versions();

/// Writes `manifest` to `path` through a temporary file and a rename.
void write_manifest(const std::string& path, const nlohmann::json& manifest);

}  // namespace titan::components
