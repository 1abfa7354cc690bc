// Hugging Face interchange: the shared tiny models (llama3_tiny, qwen3_tiny with tied
// embeddings) written back as HF folders unchanged; titan checkpoints of the llama3 and qwen3
// debug flavors exported (fp32, bf16, sharded with an index) and imported back exactly; config.json
// of the flavors against Hugging Face's published configs; stories260K through
// checkpoint.initial_load_in_hf; last_save_in_hf; and `titan convert` both ways.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "support/hf_dialect.h"
#include "support/process.h"
#include "support/sharded_state.h"
#include "titan/components/checkpoint/checkpoint_manager.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/components/checkpoint/hf_interchange.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/checkpoint/shard_writer.h"
#include "titan/errors.h"
#include "titan/models/common/generate.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/protocols/train_spec.h"

namespace titan::components::checkpoint {
namespace unit_components_checkpoint_hf_interchange_test {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string shared_model(const std::string& name) {
  return std::string(TITAN_SHARED_DATA) + "/models/" + name;
}

void expect_same_tensors(const TensorMap& expected, const TensorMap& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_EQ(actual.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(actual.at(name), t)) << name;
  }
}

// The model's parameters and buffers (MoE expert biases), as full tensors by titan name.
testing::FullState params_of(models::CausalLM& model) {
  testing::FullState out;
  for (const auto& item : model.named_parameters()) out[item.key()] = item.value().detach();
  for (const auto& item : model.named_buffers()) out[item.key()] = item.value();
  return out;
}

class HfInterchange : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("hf_interchange"); }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint of a freshly initialised `family` `flavor` model written by 2 FSDP ranks at
  // `step_dir`; returns the model.
  std::shared_ptr<models::CausalLM> write_flavor_checkpoint(const std::string& family,
                                                            const std::string& flavor,
                                                            const fs::path& step_dir) {
    const auto& spec = protocols::get_train_spec(family);
    auto model = spec.build(flavor);
    model->init_weights(5);
    const auto full = params_of(*model);
    fs::create_directories(step_dir);
    for (int r = 0; r < 2; ++r) {
      const auto pieces = testing::fsdp_pieces(full, r, 2);
      write_rank_part(step_dir.string(), r, {{"model", &pieces}}, nlohmann::json::object());
    }
    finalize_checkpoint(step_dir.string(), 2, CheckpointHeader{3, {family, flavor}});
    return model;
  }

  fs::path dir_;
};

TEST_F(HfInterchange, TinyModelsRoundTripUnchanged) {
  for (const std::string name :
       {"llama3_tiny", "qwen3_tiny", "qwen3_moe_tiny", "deepseek_v3_tiny"}) {
    SCOPED_TRACE(name);
    const auto original = load_hf_folder(shared_model(name));
    const auto type = original.config["model_type"].get<std::string>();
    const auto& spec = protocols::train_spec_for_hf_model_type(type);
    auto model = spec.build_from_hf(original.config);
    spec.from_hf(*model, original.state_dict);
    const auto& dialect = testing::hf_dialect_of(spec.name);
    const auto args = models::args_from_hf_config(original.config, spec.name == "qwen3", dialect);
    const auto config = models::hf_config_from_args(
        args, type, original.config["architectures"][0].get<std::string>(), dialect);
    const auto out = (dir_ / name).string();
    write_hf_folder(out, config, spec.to_hf(*model), torch::kFloat32);

    const auto back = load_hf_folder(out);
    expect_same_tensors(original.state_dict, back.state_dict);
    EXPECT_EQ(file_bytes(fs::path(out) / "model.safetensors"),
              file_bytes(fs::path(shared_model(name)) / "model.safetensors"));
    EXPECT_EQ(back.state_dict.count("lm_head.weight"), name == "qwen3_tiny" ? 0u : 1u);  // tied
    const auto back_args = models::args_from_hf_config(back.config, spec.name == "qwen3", dialect);
    EXPECT_EQ(models::hf_config_from_args(back_args, type, "x", dialect),
              models::hf_config_from_args(args, type, "x", dialect));
    for (const char* key : {"hidden_size", "intermediate_size", "num_key_value_heads", "head_dim",
                            "rope_theta", "rms_norm_eps", "rope_scaling", "tie_word_embeddings"}) {
      EXPECT_EQ(back.config[key], original.config[key]) << key;
    }

    write_hf_folder(out + "_bf16", config, spec.to_hf(*model), torch::kBFloat16);
    const auto bf16 = read_safetensors_folder(out + "_bf16");
    for (const auto& [n, t] : original.state_dict) {
      EXPECT_TRUE(torch::equal(bf16.at(n), t.to(torch::kBFloat16))) << n;
    }
  }
}

TEST_F(HfInterchange, FlavorConfigsMatchHuggingFace) {
  // Published config.json values of meta-llama/Llama-3.1-8B and Qwen/Qwen3-0.6B.
  const auto llama = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "vocab_size": 128256})");
  const auto qwen = nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "model_type": "qwen3", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 1000000, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "vocab_size": 151936})");
  EXPECT_EQ(flavor_for_hf_config(protocols::get_train_spec("llama3"), llama), "8B");
  EXPECT_EQ(flavor_for_hf_config(protocols::get_train_spec("qwen3"), qwen), "0.6B");
  try {
    flavor_for_hf_config(protocols::get_train_spec("llama3"),
                         read_hf_config(shared_model("stories260K")));
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json matches no llama3 flavor (debugmodel: "
                                         "head_dim = 8 (flavor: 16)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(HfInterchange, CheckpointToHfAndBack) {
  for (const std::string family : {"llama3", "qwen3"}) {
    SCOPED_TRACE(family);
    const auto& spec = protocols::get_train_spec(family);
    const auto step_dir = dir_ / family / "step-3";
    auto model = write_flavor_checkpoint(family, "debugmodel", step_dir);
    const auto hf_out = (dir_ / (family + "_hf")).string();
    export_checkpoint_to_hf(step_dir.string(), hf_out, HfExportOptions{});
    const auto exported = load_hf_folder(hf_out);
    expect_same_tensors(spec.to_hf(*model), exported.state_dict);
    EXPECT_EQ(exported.config, [&] {
      auto c = spec.hf_config("debugmodel");
      c["torch_dtype"] = "float32";
      return c;
    }());

    const auto back_dir = dir_ / (family + "_back") / "step-0";
    const auto identity = import_hf_to_checkpoint(hf_out, back_dir.string(), family, "");
    EXPECT_EQ(identity, (ModelIdentity{family, "debugmodel"}));
    const auto metadata = read_metadata(back_dir.string());
    EXPECT_TRUE(metadata.model_only);
    EXPECT_EQ(metadata.step, 0);
    auto pieces = testing::empty_pieces(params_of(*model), 0, 1);
    read_sections(back_dir.string(), metadata, {{"model", &pieces}});
    for (const auto& [name, t] : params_of(*model)) {
      EXPECT_TRUE(torch::equal(pieces.at(name).local, t)) << name;
    }
  }
}

TEST_F(HfInterchange, ShardedBf16ExportWithIndex) {
  const auto step_dir = dir_ / "step-3";
  auto model = write_flavor_checkpoint("llama3", "debugmodel", step_dir);
  const auto hf_out = dir_ / "hf";
  export_checkpoint_to_hf(step_dir.string(), hf_out.string(),
                          HfExportOptions{torch::kBFloat16, 3'000'000});
  ASSERT_TRUE(fs::exists(hf_out / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(hf_out / "model.safetensors"));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(hf_out)) {
    if (entry.path().extension() == ".safetensors") {
      ++files;
      EXPECT_LE(fs::file_size(entry.path()), 3'000'000u + 100'000u) << entry.path();
    }
  }
  EXPECT_GT(files, 2);
  EXPECT_TRUE(fs::exists(hf_out / fmt::format("model-00001-of-{:05d}.safetensors", files)));
  const auto exported = load_hf_folder(hf_out.string());
  EXPECT_EQ(exported.config["torch_dtype"], "bfloat16");
  const auto& spec = protocols::get_train_spec("llama3");
  for (const auto& [name, t] : spec.to_hf(*model)) {
    EXPECT_TRUE(torch::equal(exported.state_dict.at(name), t.to(torch::kBFloat16))) << name;
  }
}

// Qwen3-MoE files have no expert biases: they start at zero; DeepSeek-V3's are loaded.
TEST_F(HfInterchange, InitialLoadInHfFillsShardedPieces) {
  for (const std::string name : {"stories260K", "qwen3_tiny", "qwen3_moe_tiny", "deepseek_v3_tiny"}) {
    SCOPED_TRACE(name);
    const auto hf = load_hf_folder(shared_model(name));
    const auto& spec =
        protocols::train_spec_for_hf_model_type(hf.config["model_type"].get<std::string>());
    auto expected_model = spec.build_from_hf(hf.config);
    spec.from_hf(*expected_model, hf.state_dict);
    const auto expected = params_of(*expected_model);

    config::CheckpointSection c;
    c.enable = true;
    c.folder = "checkpoint_" + name;
    c.initial_load_path = shared_model(name);
    c.initial_load_in_hf = true;
    std::vector<distributed::ShardedStateDict> ranks;
    for (int r = 0; r < 2; ++r) {  // two FSDP ranks, each its own world of one here
      CheckpointManager m(c, dir_.string(), testing::group_of_one(), {spec.name, "custom"});
      auto model = testing::empty_pieces(expected, r, 2);
      distributed::ShardedStateDict optimizer;
      nlohmann::json state;
      auto result = m.load(model, optimizer, state);
      ASSERT_TRUE(result);
      EXPECT_TRUE(result->model_only);
      EXPECT_EQ(result->step, 0);
      ranks.push_back(std::move(model));
    }
    const auto loaded = testing::gather(ranks);
    for (const auto& [n, t] : expected) EXPECT_TRUE(torch::equal(loaded.at(n), t)) << n;
  }
}

// `titan generate --checkpoint` routes with the checkpoint's expert biases: its score is the
// biased model's, not the one with zero biases.
TEST_F(HfInterchange, GenerateRoutesWithTheCheckpointsExpertBiases) {
  const auto& spec = protocols::get_train_spec("qwen3");
  auto model = spec.build("debugmodel_moe_small");
  model->init_weights(5);
  std::vector<torch::Tensor> biases;
  for (const auto& item : model->named_buffers()) biases.push_back(item.value());
  ASSERT_EQ(biases.size(), 2u);
  {
    torch::NoGradGuard no_grad;
    for (auto& b : biases) b.narrow(0, 0, 2).fill_(5.0);  // experts 0 and 1 take every token
  }
  const auto step_dir = dir_ / "moe" / "step-3";
  fs::create_directories(step_dir);
  const auto full = params_of(*model);
  for (int r = 0; r < 2; ++r) {
    const auto pieces = testing::fsdp_pieces(full, r, 2);
    write_rank_part(step_dir.string(), r, {{"model", &pieces}}, nlohmann::json::object());
  }
  finalize_checkpoint(step_dir.string(), 2,
                      CheckpointHeader{3, {"qwen3", "debugmodel_moe_small"}});
  const std::vector<int64_t> ids = {1, 17, 254, 3, 99, 400, 12, 511};
  model->eval();
  const double biased = models::prompt_loss(*model, ids);
  for (auto& b : biases) b.zero_();
  const double unbiased = models::prompt_loss(*model, ids);
  auto r = testing::run_command(testing::titan_binary() + " generate --checkpoint " +
                                step_dir.string() + " --prompt_ids 1,17,254,3,99,400,12,511 --score");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto at = r.output.find("loss: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const double scored = std::stod(r.output.substr(at + 6));
  EXPECT_NEAR(scored, biased, 2e-6);  // printed with 6 decimals
  EXPECT_GT(std::abs(biased - unbiased), 1e-4) << "the biases change the routing";
}

// The softmax DeepSeek flavors have no DeepseekV3 config: matching a config.json names that for
// each, and ends as "matches no flavor" rather than failing on the first.
TEST_F(HfInterchange, DeepseekFlavorMatchingSaysWhichFlavorsHaveNoHfConfig) {
  const auto hf = load_hf_folder(shared_model("deepseek_v3_tiny"));
  try {
    flavor_for_hf_config(protocols::get_train_spec("deepseek_v3"), hf.config);
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("matches no deepseek_v3 flavor"), std::string::npos) << what;
    EXPECT_NE(what.find("debugmodel: no Hugging Face config"), std::string::npos) << what;
    EXPECT_NE(what.find("671B: "), std::string::npos) << what;
  }
}

TEST_F(HfInterchange, InitialLoadInHfRefusesAnotherFamily) {
  distributed::ShardedStateDict pieces;
  try {
    load_hf_into_pieces(shared_model("qwen3_tiny"), "llama3", pieces);
    FAIL() << "no CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: model_type 'qwen3' is not a llama3 model "
                                         "(expected: llama)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(HfInterchange, LastSaveInHf) {
  const auto& spec = protocols::get_train_spec("qwen3");
  auto model = spec.build("debugmodel");
  model->init_weights(9);
  config::CheckpointSection c;
  c.enable = true;
  c.last_save_in_hf = true;
  c.export_dtype = "bfloat16";
  CheckpointManager m(c, dir_.string(), testing::group_of_one(), {"qwen3", "debugmodel"});
  const auto pieces = testing::fsdp_pieces(params_of(*model), 0, 1);
  m.save(20, pieces, {}, nlohmann::json::object(), "", /*last=*/true);
  const auto hf_dir = dir_ / "checkpoint" / "step-20" / "hf";
  ASSERT_TRUE(fs::exists(hf_dir / "model.safetensors"));
  const auto exported = load_hf_folder(hf_dir.string());
  EXPECT_EQ(exported.config["model_type"], "qwen3");
  for (const auto& [name, t] : spec.to_hf(*model)) {
    EXPECT_TRUE(torch::equal(exported.state_dict.at(name), t.to(torch::kBFloat16))) << name;
  }
}

TEST_F(HfInterchange, ConvertCommandBothWays) {
  const auto step_dir = dir_ / "ckpt" / "step-3";
  auto model = write_flavor_checkpoint("llama3", "debugmodel", step_dir);
  const auto hf_out = dir_ / "hf";
  auto r = testing::run_command(fmt::format(
      "{} convert --to hf --checkpoint {} --output {} --export_dtype bfloat16 "
      "--max_shard_bytes 3000000",
      testing::titan_binary(), step_dir.string(), hf_out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(hf_out / "model.safetensors.index.json"));

  const auto back = dir_ / "back" / "step-0";
  r = testing::run_command(fmt::format("{} convert --to titan --hf_assets_path {} --output {}",
                                       testing::titan_binary(), hf_out.string(), back.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(llama3 debugmodel, step 0, model only)"), std::string::npos)
      << r.output;
  const auto metadata = read_metadata(back.string());
  auto pieces = testing::empty_pieces(params_of(*model), 0, 1);
  read_sections(back.string(), metadata, {{"model", &pieces}});
  for (const auto& [name, t] : params_of(*model)) {
    EXPECT_TRUE(torch::equal(pieces.at(name).local,
                             t.to(torch::kBFloat16).to(torch::kFloat32)))
        << name;
  }

  r = testing::run_command(fmt::format("{} convert --to titan --hf_assets_path {} --output {}",
                                       testing::titan_binary(), shared_model("stories260K"),
                                       (dir_ / "stories" / "step-0").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("matches no llama3 flavor"), std::string::npos) << r.output;
  r = testing::run_command(fmt::format(
      "{} convert --to titan --module llama3 --flavor debugmodel --hf_assets_path {} --output {}",
      testing::titan_binary(), shared_model("stories260K"),
      (dir_ / "stories" / "step-0").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("stories260K/config.json: does not describe llama3 'debugmodel': "
                          "head_dim = 8 (flavor: 16)"),
            std::string::npos)
      << r.output;
  r = testing::run_command(fmt::format("{} convert --to hf --output x", testing::titan_binary()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--checkpoint is required"), std::string::npos) << r.output;

  // Issue 40: an existing output is not replaced silently; --overwrite replaces it.
  const auto written = fs::last_write_time(back / "metadata.json");
  r = testing::run_command(fmt::format("{} convert --to titan --hf_assets_path {} --output {}",
                                       testing::titan_binary(), hf_out.string(), back.string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--output " + back.string() + " exists and is not empty"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(fs::last_write_time(back / "metadata.json"), written);
  r = testing::run_command(fmt::format("{} convert --to hf --checkpoint {} --output {}",
                                       testing::titan_binary(), step_dir.string(),
                                       hf_out.string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // --overwrite replaces the folder: the sharded export's files do not stay beside one file.
  r = testing::run_command(fmt::format("{} convert --to hf --checkpoint {} --output {} --overwrite",
                                       testing::titan_binary(), step_dir.string(),
                                       hf_out.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(hf_out / "model.safetensors"));
  EXPECT_FALSE(fs::exists(hf_out / "model.safetensors.index.json"));
  r = testing::run_command(
      fmt::format("{} convert --to titan --hf_assets_path {} --output {} --overwrite",
                  testing::titan_binary(), hf_out.string(), back.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace unit_components_checkpoint_hf_interchange_test
}  // namespace titan::components::checkpoint
