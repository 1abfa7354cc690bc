#include "titan/components/manifest.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <torch/version.h>

#include "titan/errors.h"
#include "titan/platform/blas.h"

#ifdef TITAN_CUDA
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#endif

namespace titan::components {

nlohmann::json environment_versions() {
  auto blas = platform::blas_info();
  utsname os{};
  uname(&os);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  nlohmann::json v = {
      {"titan_git_revision", git_revision()},
      {"libtorch", TORCH_VERSION},
      {"compiler", std::string("g++ ") + __VERSION__},
      {"blas", {{"library", blas.library}, {"kernels", blas.kernels},
                {"optimized", blas.optimized}}},
      {"os", std::string(os.sysname) + " " + os.release + " " + os.machine},
      {"host", host},
      {"cpu_threads", torch::get_num_threads()},
  };
#ifdef TITAN_CUDA
  v["cuda"] = {{"built_with", platform::libtorch_build_setting("CUDA_VERSION")},
               {"cudnn", platform::libtorch_build_setting("CUDNN_VERSION")},
               {"nccl", c10d::getNcclVersion()}};
#endif
  return v;
}

void write_manifest(const std::string& path, const nlohmann::json& manifest) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << manifest.dump(2) << "\n";
    if (!out) throw Error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace titan::components
