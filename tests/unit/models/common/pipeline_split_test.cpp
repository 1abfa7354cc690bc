// The default pipeline split against TorchTitan's own: tests/data/torchtitan_pipeline_splits.json
// holds the module names of every stage that TorchTitan's _generate_llm_fqn_per_model_part
// gives, or its refusal (recorded by scripts/record_torchtitan_pipeline_split.py, commit in the
// file). The family's hook splits real flavors into parts that hold the whole model.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "titan/errors.h"
#include "titan/models/common/pipeline_split.h"
#include "titan/models/common/transformer.h"
#include "titan/protocols/train_spec.h"

namespace titan::models {
namespace unit_models_common_pipeline_split_test {

// A part's pieces by TorchTitan's module names (its output projection is "lm_head").
std::vector<std::string> fqns(const PartRange& part) {
  std::vector<std::string> names;
  if (part.embedding) names.push_back("tok_embeddings");
  for (int64_t l = part.first_layer; l < part.end_layer; ++l) {
    names.push_back("layers." + std::to_string(l));
  }
  if (part.output) {
    names.push_back("norm");
    names.push_back("lm_head");
  }
  return names;
}

TEST(PipelineSplit, EveryCaseMatchesTorchTitan) {
  std::ifstream in(std::string(TITAN_SOURCE_DIR) + "/tests/data/torchtitan_pipeline_splits.json");
  const auto cases = nlohmann::json::parse(in)["cases"];
  ASSERT_GE(cases.size(), 15u);
  int refused = 0;
  for (const auto& c : cases) {
    PipelineSplit split{c["num_stages"], c["input_weight"], c["output_weight"], {}};
    const int64_t layers = c["num_layers"];
    const std::string name = c.dump();
    if (c.contains("error")) {
      EXPECT_THROW(split_for_pipeline(layers, split), ConfigError) << name;
      ++refused;
      continue;
    }
    std::vector<std::vector<std::string>> got;
    for (const auto& part : split_for_pipeline(layers, split)) got.push_back(fqns(part));
    EXPECT_EQ(got, c["stages"].get<std::vector<std::vector<std::string>>>()) << name;
  }
  EXPECT_GE(refused, 3);
}

TEST(PipelineSplit, RefusalsNameTheNumbers) {
  try {
    split_for_pipeline(6, {9, 1, 1, {}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("9 pipeline stages cannot share 8 layers"),
              std::string::npos)
        << e.what();
  }
  try {
    split_for_pipeline(6, {6, 2, 1, {}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the embedding counted as 2 layers"), std::string::npos)
        << e.what();
  }
}

// TorchTitan's module_fqns_per_model_part: any contiguous split, checked module by module
// (fqns() names the output as newer TorchTitan does, lm_head; both names are accepted).
TEST(PipelineSplit, ExplicitModuleNamesGiveTheirStagesOrANamedError) {
  PipelineSplit named;
  named.module_names = {{"tok_embeddings"}, {"layers.0", "layers.1", "layers.2"},
                        {"layers.3", "norm", "output"}};
  const auto stages = split_for_pipeline(4, named);
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(fqns(stages[0]), (std::vector<std::string>{"tok_embeddings"}));
  EXPECT_EQ(fqns(stages[1]), (std::vector<std::string>{"layers.0", "layers.1", "layers.2"}));
  EXPECT_EQ(fqns(stages[2]), (std::vector<std::string>{"layers.3", "norm", "lm_head"}));
  named.module_names.back().back() = "lm_head";  // newer TorchTitan's name of the output
  EXPECT_TRUE(split_for_pipeline(4, named).back().output);
  const std::vector<std::pair<std::vector<std::vector<std::string>>, std::string>> bad = {
      {{{"tok_embeddings", "layers.1"}, {"layers.0", "layers.2", "layers.3", "norm", "output"}},
       "stage 0 lists layers.1 where layers.0 comes next"},
      {{{"tok_embeddings", "layers.0", "layers.1"}, {"layers.2", "norm", "output"}},
       "the stages hold layers.0 .. layers.2 of the model's 4 blocks"},
      {{{"layers.0", "layers.1"}, {"tok_embeddings", "layers.2", "layers.3", "norm", "output"}},
       "tok_embeddings must be in the first stage"},
      {{{"tok_embeddings", "layers.0", "norm", "output"}, {"layers.1", "layers.2", "layers.3"}},
       "norm and output must be in the last stage"},
      {{{"tok_embeddings", "layers.0"}, {"layers.1", "layers.2", "layers.3", "final_norm"}},
       "stage 1: 'final_norm' is not a module of the model"},
      {{{"tok_embeddings", "layers.0"}, {"layers.1", "layers.2", "layers.3", "layers.9"}},
       "stage 1: layers.9 is past the model's 4 blocks (layers.0 .. layers.3)"},
      {{{"tok_embeddings", "layers.0"}, {"layers.1", "layers.2", "layers.3", "norm"}},
       "stage 1 holds norm without output"},
      {{{"tok_embeddings", "layers.0", "layers.1"}, {}, {"layers.2", "layers.3", "norm",
                                                         "output"}},
       "stage 1 holds no module"},
  };
  for (const auto& [names, message] : bad) {
    PipelineSplit split;
    split.module_names = names;
    try {
      split_for_pipeline(4, split);
      ADD_FAILURE() << message;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("parallelism.module_fqns_per_model_part: " + message),
                std::string::npos)
          << e.what();
    }
  }
}

// The TrainSpec hook splits a flavor by its layer count, and the stages built from it hold
// between them every parameter of the whole model exactly once.
TEST(PipelineSplit, TheFamilysHookSplitsAFlavorIntoPartsThatCoverTheModel) {
  const auto& spec = protocols::get_train_spec("llama3");
  const auto stages = spec.pipeline_split("8B", {4, 1, 1, {}});
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(fqns(stages[0]).size(), 1u + 8);  // 34 effective layers: 9, 9, 8, 8
  EXPECT_EQ(stages[3].end_layer, 32);
  auto whole = spec.build_on_device("8B", torch::kMeta);
  int64_t params = 0;
  for (const auto& range : stages) {
    params += spec.build_part("8B", torch::kMeta, range)->num_params();
  }
  EXPECT_EQ(params, whole->num_params());
  EXPECT_THROW(spec.pipeline_split("8B", {40, 1, 1, {}}), ConfigError);
}

}  // namespace unit_models_common_pipeline_split_test
}  // namespace titan::models
