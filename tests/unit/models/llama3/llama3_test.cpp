// llama3 family: flavors, sizes and FLOPs, and parity with the float64 references of
// stories260K (Llama 2 architecture, tied) and llama3_tiny (Llama 3.1 rope scaling, untied).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../hf_parity.h"
#include "titan/errors.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/generate.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"
#include "titan/protocols/train_spec.h"

namespace titan {
namespace unit_models_llama3_llama3_test {

using testing::load_expected;
using testing::load_hf_model;
using testing::rel_err;
using testing::report;

// stories260K: greedy ids exact; logits_first8 (6 decimals) to 1e-4 in float32 and to the
// rounding (5e-7) in float64; loss and grad norm to 1e-5 relative in float32, 1e-10 in float64.
void check_stories(torch::ScalarType dtype, double logit_tol, double rel_tol) {
  const auto expected = load_expected("stories260K");
  const std::string tag = std::string("stories260K ") + c10::toString(dtype);
  auto model = load_hf_model("stories260K", dtype);
  const auto ids = testing::json_ids(expected["prompt"]["input_ids"]);
  auto r = testing::run_prompt(*model, ids);
  double max_logit_err = 0.0;
  for (const auto& [pos, row] : expected["prompt"]["logits_first8"].items()) {
    for (int64_t v = 0; v < 8; ++v) {
      const double got = r.logits[std::stoi(pos)][v].item<double>();
      max_logit_err = std::max(max_logit_err, std::abs(got - row[v].get<double>()));
    }
  }
  report(tag + " logits_first8 max abs err", max_logit_err);
  report(tag + " mean_loss rel err", rel_err(r.loss, expected["prompt"]["mean_loss"]));
  report(tag + " grad_norm rel err", rel_err(r.grad_norm, expected["prompt"]["grad_norm"]));
  EXPECT_LE(max_logit_err, logit_tol);
  EXPECT_LE(rel_err(r.loss, expected["prompt"]["mean_loss"]), rel_tol);
  EXPECT_LE(rel_err(r.grad_norm, expected["prompt"]["grad_norm"]), rel_tol);

  models::GenerateOptions greedy;
  greedy.max_new_tokens = expected["greedy"]["num_new_tokens"];
  auto out = models::generate(*model, testing::json_ids(expected["greedy"]["start_ids"]), greedy);
  EXPECT_EQ(out, testing::json_ids(expected["greedy"]["ids"]));
}

TEST(Llama3Parity, Stories260KFloat32) { check_stories(torch::kFloat32, 1e-4, 1e-5); }
TEST(Llama3Parity, Stories260KFloat64) { check_stories(torch::kFloat64, 5.1e-7, 1e-10); }

// llama3_tiny: all 18 x 512 logits (8 decimals) to 1e-5 in float32 and to the rounding (5e-9)
// in float64; loss, grad norm and every tensor's grad norm; the 20 greedy ids; inv_freq.
void check_llama3_tiny(torch::ScalarType dtype, double logit_tol, double rel_tol) {
  const auto expected = load_expected("llama3_tiny");
  const std::string tag = std::string("llama3_tiny ") + c10::toString(dtype);
  auto model = load_hf_model("llama3_tiny", dtype);
  const auto ids = testing::json_ids(expected["prompt"]["input_ids"]);
  auto r = testing::run_prompt(*model, ids);
  std::vector<double> flat;
  for (const auto& row : expected["prompt"]["logits"]) {
    for (double v : row) flat.push_back(v);
  }
  auto want = torch::tensor(flat, torch::kFloat64).view(r.logits.sizes());  // want: [18, 512]
  const double max_logit_err = (r.logits - want).abs().max().item<double>();
  double max_param_err = 0.0;
  for (const auto& [name, norm] : expected["prompt"]["param_grad_norms"].items()) {
    ASSERT_TRUE(r.grad_norms.count(name)) << name;
    max_param_err = std::max(max_param_err, rel_err(r.grad_norms[name], norm.get<double>()));
  }
  EXPECT_EQ(r.grad_norms.size(), expected["prompt"]["param_grad_norms"].size());
  report(tag + " logits max abs err", max_logit_err);
  report(tag + " mean_loss rel err", rel_err(r.loss, expected["prompt"]["mean_loss"]));
  report(tag + " grad_norm rel err", rel_err(r.grad_norm, expected["prompt"]["grad_norm"]));
  report(tag + " param_grad_norms max rel err", max_param_err);
  EXPECT_LE(max_logit_err, logit_tol);
  EXPECT_LE(rel_err(r.loss, expected["prompt"]["mean_loss"]), rel_tol);
  EXPECT_LE(rel_err(r.grad_norm, expected["prompt"]["grad_norm"]), rel_tol);
  EXPECT_LE(max_param_err, 10 * rel_tol);

  models::GenerateOptions greedy;
  greedy.max_new_tokens = expected["greedy"]["num_new_tokens"];
  auto out = models::generate(*model, testing::json_ids(expected["greedy"]["start_ids"]), greedy);
  EXPECT_EQ(out, testing::json_ids(expected["greedy"]["ids"]));

  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  auto inv_freq = torch::tensor(expected["rope"]["inv_freq"].get<std::vector<double>>(),
                                torch::kFloat64);
  const double freq_err =
      ((transformer.inv_freq() - inv_freq).abs() / inv_freq).max().item<double>();
  report(tag + " rope.inv_freq max rel err", freq_err);
  EXPECT_LE(freq_err, 1e-12);
}

TEST(Llama3Parity, Llama3TinyFloat32) { check_llama3_tiny(torch::kFloat32, 1e-5, 1e-5); }
TEST(Llama3Parity, Llama3TinyFloat64) { check_llama3_tiny(torch::kFloat64, 5.1e-9, 1e-10); }

TEST(Llama3Flavors, SizesMatchTheReleasedModels) {
  const auto& spec = protocols::get_train_spec("llama3");
  EXPECT_EQ(spec.flavors,
            (std::vector<std::string>{"debugmodel", "100M", "1B", "3B", "8B", "70B", "405B"}));
  // Parameter counts of the Hugging Face releases (tied embeddings counted once).
  const std::map<std::string, int64_t> released = {
      {"1B", 1235814400}, {"3B", 3212749824}, {"8B", 8030261248}, {"70B", 70553706496},
      {"405B", 405853388800}};
  for (const auto& [flavor, params] : released) {
    auto model = spec.build_on_device(flavor, torch::kMeta);
    EXPECT_EQ(model->num_params(), params) << flavor;
  }
  // The benchmark shape: 12 x (2 x 768^2 + 2 x 256 x 768 + 3 x 768 x 2048 + 2 x 768) + 2 x 2048
  // x 768 + 768.
  EXPECT_EQ(spec.build_on_device("100M", torch::kMeta)->num_params(), 78662400);
  auto debug = spec.build("debugmodel");
  EXPECT_EQ(debug->shape().vocab_size, 2048);
  auto* block = debug->blocks().front().module;
  EXPECT_EQ(block->attention->as<models::AttentionImpl>()->options.head_dim, 16);
}

// 8B by hand: per layer wq 4096^2 + wk, wv 1024 x 4096 each + wo 4096^2, FFN 3 x 4096 x 14336,
// two norms; plus embedding, output, final norm.
TEST(Llama3Flavors, FlopsPerTokenOf8B) {
  auto model = protocols::get_train_spec("llama3").build_on_device("8B", torch::kMeta);
  const int64_t dim = 4096, layers = 32, heads = 32, head_dim = 128, vocab = 128256;
  const int64_t kv = 8 * head_dim, hidden = 14336, seq = 8192;
  const int64_t per_layer = 2 * dim * dim + 2 * kv * dim + 3 * dim * hidden + 2 * dim;
  const int64_t embedding = vocab * dim;
  const int64_t params = layers * per_layer + 2 * embedding + dim;
  EXPECT_EQ(model->num_params(), params);
  EXPECT_EQ(model->num_embedding_params(), embedding);
  const int64_t flops = 6 * (params - embedding) + 12 * layers * heads * head_dim * seq;
  EXPECT_EQ(model->flops_per_token(seq), flops);
}

// TorchTitan's own RoPE code (0.3.0's ComplexRoPE and 0.2.2's precompute_freqs_cis agree),
// recorded by scripts/record_torchtitan_rope.py into tests/data/torchtitan_llama3_rope.json:
// the formula at float64 precision to 1e-12, and the float32 values TorchTitan computes with
// to float32 rounding (titan computes in float64: TorchTitan's float32 pow and divisions are
// a few ulps off the exact values).
TEST(Llama3Flavors, RopeFrequenciesAreTorchTitans) {
  std::ifstream in(std::string(TITAN_SOURCE_DIR) + "/tests/data/torchtitan_llama3_rope.json");
  const auto recorded = nlohmann::json::parse(in);
  const auto& spec = protocols::get_train_spec("llama3");
  ASSERT_EQ(recorded["flavors"].size(), 3u);
  for (const auto& [flavor, entry] : recorded["flavors"].items()) {
    auto model = spec.build_on_device(flavor, torch::kMeta);
    const torch::Tensor got = dynamic_cast<models::Transformer&>(*model).inv_freq();
    const auto& args = dynamic_cast<models::Transformer&>(*model).args();
    ASSERT_TRUE(args.rope_scaling) << flavor;
    EXPECT_EQ(args.rope_scaling->factor, entry["scaling"]["factor"].get<double>()) << flavor;
    EXPECT_EQ(args.rope_scaling->low_freq_factor, entry["scaling"]["low_freq_factor"]) << flavor;
    EXPECT_EQ(args.rope_scaling->high_freq_factor, entry["scaling"]["high_freq_factor"]);
    EXPECT_EQ(args.rope_scaling->original_max_position_embeddings,
              entry["scaling"]["original_max_position_embeddings"]);
    EXPECT_EQ(args.rope_theta, entry["theta"].get<double>()) << flavor;
    const auto exact =
        torch::tensor(entry["inv_freq_float64"].get<std::vector<double>>(), torch::kFloat64);
    const auto f32 =
        torch::tensor(entry["inv_freq_float32"].get<std::vector<double>>(), torch::kFloat64);
    ASSERT_EQ(got.sizes(), exact.sizes()) << flavor;
    const double err = (got - exact).abs().max().item<double>();
    const double err32 = ((got - f32).abs() / f32).max().item<double>();
    report("llama3 " + flavor + " inv_freq max abs err vs TorchTitan (float64)", err);
    report("llama3 " + flavor + " inv_freq max rel err vs TorchTitan (float32)", err32);
    EXPECT_LE(err, 1e-12) << flavor;
    EXPECT_LE(err32, 1e-6) << flavor;
  }
}

// Llama 3.1's scaling travels to a Hugging Face config.json and back; a config without one
// builds a model without scaling, and exports null.
TEST(Llama3Flavors, HfConfigRoundTripsRopeScaling) {
  const auto& spec = protocols::get_train_spec("llama3");
  const nlohmann::json config = spec.hf_config("debugmodel");
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(config["rope_scaling"]["factor"], 8.0);
  auto back = dynamic_cast<models::Transformer&>(*spec.build_from_hf(config)).args();
  ASSERT_TRUE(back.rope_scaling);
  EXPECT_EQ(back.rope_scaling->factor, 8.0);
  EXPECT_EQ(back.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(back.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(spec.hf_config("1B")["rope_scaling"]["factor"], 32.0);

  nlohmann::json plain = config;
  plain["rope_scaling"] = nullptr;
  auto model = spec.build_from_hf(plain);
  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  EXPECT_FALSE(transformer.args().rope_scaling);
  EXPECT_TRUE(models::hf_config_from_args(transformer.args(), "llama", "LlamaForCausalLM")
                  ["rope_scaling"].is_null());
  // Unscaled frequencies: theta^(-2i/16).
  EXPECT_NEAR(transformer.inv_freq()[7].item<double>(), std::pow(500000.0, -14.0 / 16.0), 1e-18);
}

TEST(Llama3Flavors, UnknownFlavorNamesTheValidOnes) {
  try {
    protocols::get_train_spec("llama3").build("7B");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.flavor"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("debugmodel, 100M, 1B, 3B, 8B, 70B, 405B"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace unit_models_llama3_llama3_test
}  // namespace titan
