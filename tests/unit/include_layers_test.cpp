// The layers of src/titan depend one way: every `#include "titan/..."` names a file of its own
// layer or a lower one. From the bottom (README, "Where things live"):
//   base        errors.h, pch.h, platform/     the process, clocks, memory, BLAS, logging
//   protocols   protocols/                     the TrainSpec contract, types only declared
//   config      config/                        keys, named configs, resolution
//   models      models/ (but infra)            layers, blocks, kernels, families' flavors
//   distributed distributed/                   meshes, FSDP, TP, CP, EP, PP, collectives
//   components  components/                    checkpoint, data, tokenizer, optimizer, metrics
//   infra       models/**/infra/, models/registry.cpp   families' parallelize and train specs
//   tools       tools/                         planner, profiler, memory snapshots, compare
//   train       train/                         the trainer, the dry run
//   cli         cli/                           the `titan` subcommands
// A file outside every layer (a new folder) fails too: give it a layer here and in the README.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace titan::unit_include_layers_test {

namespace fs = std::filesystem;

// The layer of a path under src/titan (e.g. "models/common/rope.h"), bottom first; nullopt for
// a path no layer holds.
std::optional<int> layer_of(const std::string& path) {
  if (path.find("/infra/") != std::string::npos || path.rfind("models/registry.", 0) == 0) {
    return 6;
  }
  static const std::vector<std::pair<std::string, int>> prefixes = {
      {"errors.h", 0}, {"pch.h", 0},   {"platform/", 0},    {"protocols/", 1},
      {"config/", 2},  {"models/", 3}, {"distributed/", 4}, {"components/", 5},
      {"tools/", 7},   {"train/", 8},  {"cli/", 9},
  };
  for (const auto& [prefix, layer] : prefixes) {
    if (path.rfind(prefix, 0) == 0) return layer;
  }
  return std::nullopt;
}

// The titan headers `file` includes ("models/common/rope.h", ...).
std::vector<std::string> titan_includes(const fs::path& file) {
  static const std::string kMark = "#include \"titan/";
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kMark, 0) == 0) {
      out.push_back(line.substr(kMark.size(), line.find('"', kMark.size()) - kMark.size()));
    }
  }
  return out;
}

TEST(IncludeLayers, TheRuleTellsUpFromDown) {
  EXPECT_LT(*layer_of("platform/clock.h"), *layer_of("models/common/rope.h"));
  EXPECT_LT(*layer_of("models/common/rope.h"), *layer_of("distributed/fsdp.h"));
  EXPECT_LT(*layer_of("components/loss.h"), *layer_of("models/llama3/infra/train_spec.h"));
  EXPECT_LT(*layer_of("models/registry.cpp"), *layer_of("train/trainer.h"));
  EXPECT_LT(*layer_of("protocols/train_spec.h"), *layer_of("config/schema.h"));
  EXPECT_FALSE(layer_of("widgets/gear.h").has_value());
}

TEST(IncludeLayers, NoFileIncludesAHigherLayer) {
  const fs::path root = fs::path(TITAN_SOURCE_DIR) / "src" / "titan";
  std::vector<std::string> problems;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    ++files;
    const std::string path = fs::relative(entry.path(), root).generic_string();
    const auto layer = layer_of(path);
    if (!layer) {
      problems.push_back(path + ": in no layer");
      continue;
    }
    for (const auto& include : titan_includes(entry.path())) {
      const auto included = layer_of(include);
      if (!included || *included > *layer) problems.push_back(path + " includes " + include);
    }
  }
  EXPECT_GT(files, 200) << "read " << root;
  std::string list;
  for (const auto& p : problems) list += "\n  " + p;
  EXPECT_TRUE(problems.empty()) << problems.size() << " includes go up a layer:" << list;
}

}  // namespace titan::unit_include_layers_test
