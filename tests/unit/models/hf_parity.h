// Test helpers for the Hugging Face parity models under shared/data/models (stories260K,
// llama3_tiny, qwen3_tiny, qwen3_moe_tiny, deepseek_v3_tiny): load a folder through the registered TrainSpec, measure logits,
// loss and gradient norms, and compare with the float64 references in expected.json.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/hf_dialect.h"
#include "titan/components/checkpoint/hf_folder.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/generate.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rope.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"
#include "titan/protocols/train_spec.h"

namespace titan::testing {

inline std::string model_dir(const std::string& name) {
  return std::string(TITAN_SHARED_DATA) + "/models/" + name;
}

inline nlohmann::json load_expected(const std::string& name) {
  std::ifstream in(model_dir(name) + "/expected.json");
  return nlohmann::json::parse(in);
}

/// The model in folder `name`, loaded through the spec of its model_type, in `dtype`.
inline std::shared_ptr<models::CausalLM> load_hf_model(const std::string& name,
                                                       torch::ScalarType dtype) {
  auto folder = components::load_hf_folder(model_dir(name));
  const auto& spec = protocols::train_spec_for_hf_model_type(folder.config["model_type"]);
  auto model = spec.build_from_hf(folder.config);
  model->to(dtype);
  spec.from_hf(*model, folder.state_dict);
  return model;
}

struct PromptResult {
  torch::Tensor logits;  // [S, V] float64
  double loss = 0.0;
  double grad_norm = 0.0;
  std::map<std::string, double> grad_norms;  // by Hugging Face name
};

/// Forward and backward of the mean next-token cross-entropy of `ids`.
inline PromptResult run_prompt(models::CausalLM& model, const std::vector<int64_t>& ids) {
  model.zero_grad();
  const int64_t n = static_cast<int64_t>(ids.size());
  auto tokens = torch::tensor(ids, torch::kInt64).unsqueeze(0);                 // tokens: [1, n]
  auto logits = model.forward(tokens).squeeze(0);                              // logits: [n, V]
  auto loss = torch::nn::functional::cross_entropy(logits.narrow(0, 0, n - 1),
                                                   tokens.squeeze(0).narrow(0, 1, n - 1));  // []
  loss.backward();
  PromptResult r;
  r.logits = logits.detach().to(torch::kFloat64);
  r.loss = loss.item<double>();
  double total = 0.0;
  const bool mla = dynamic_cast<models::Transformer&>(model).args().mla.has_value();
  const auto& dialect = hf_dialect_of(mla ? "deepseek_v3" : "");
  for (const auto& item : model.named_parameters()) {
    for (const auto& [name, grad] : models::hf_tensors(item.key(), item.value().grad(), dialect)) {
      const double norm = grad.to(torch::kFloat64).norm().item<double>();
      r.grad_norms[name] = norm;
      total += norm * norm;
    }
  }
  r.grad_norm = std::sqrt(total);
  return r;
}

inline std::vector<int64_t> json_ids(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

inline double rel_err(double got, double want) { return std::abs(got - want) / std::abs(want); }

/// Prints a measured error so that test logs document the achieved precision.
inline void report(const std::string& what, double value) {
  std::cout << "[measured] " << what << ": " << value << "\n";
}

/// Each MoE layer's routing of `ids`, from its router on the block's ffn_norm output.
inline std::map<std::string, models::Routing> routing_of(models::Transformer& model,
                                                         const std::vector<int64_t>& ids) {
  torch::NoGradGuard no_grad;
  auto h = model.tok_embeddings(torch::tensor(ids, torch::kInt64).unsqueeze(0));  // [1, T, dim]
  auto [cos, sin] = models::rope_cos_sin(model.inv_freq(), static_cast<int64_t>(ids.size()),
                                         h.scalar_type(), h.device());
  std::map<std::string, models::Routing> out;
  for (const auto& [layer, block] : model.blocks()) {
    h = h + block->attention->forward(block->attention_norm(h), cos, sin);
    auto n = block->ffn_norm(h);  // [1, T, dim]
    if (auto* moe = block->feed_forward->as<models::MoEImpl>()) {
      out[std::to_string(layer)] = moe->router(n.squeeze(0), moe->expert_bias);
    }
    h = h + block->feed_forward->forward(n);
  }
  return out;
}

struct MoeTolerances {
  double logits;   // absolute
  double rel;      // loss and gradient norm (every tensor's: 10x)
  double weights;  // combine weights, absolute
};

/// Loads the MoE parity model `name` in `dtype` and checks it against
/// expected.json: every logit, the loss, the gradient norm and every tensor's (exactly 0 for the
/// experts no token chose), each token's experts (same, best first) and combine weights in
/// every MoE layer, and the greedy ids. Returns the model.
inline std::shared_ptr<models::CausalLM> check_moe_parity(const std::string& name,
                                                          torch::ScalarType dtype,
                                                          const MoeTolerances& tol) {
  const auto expected = load_expected(name);
  const std::string tag = name + " " + c10::toString(dtype);
  auto model = load_hf_model(name, dtype);
  const auto ids = json_ids(expected["prompt"]["input_ids"]);
  auto r = run_prompt(*model, ids);
  std::vector<double> flat;
  for (const auto& row : expected["prompt"]["logits"]) {
    for (double v : row) flat.push_back(v);
  }
  auto want = torch::tensor(flat, torch::kFloat64).view(r.logits.sizes());  // want: [T, V]
  const double max_logit_err = (r.logits - want).abs().max().item<double>();
  double max_param_err = 0.0;
  for (const auto& [param, norm] : expected["prompt"]["param_grad_norms"].items()) {
    EXPECT_TRUE(r.grad_norms.count(param)) << param;
    const double want_norm = norm.get<double>();
    if (want_norm == 0.0) {
      EXPECT_EQ(r.grad_norms[param], 0.0) << param << ": an expert no token chose";
    } else {
      max_param_err = std::max(max_param_err, rel_err(r.grad_norms[param], want_norm));
    }
  }
  EXPECT_EQ(r.grad_norms.size(), expected["prompt"]["param_grad_norms"].size());
  report(tag + " logits max abs err", max_logit_err);
  report(tag + " mean_loss rel err", rel_err(r.loss, expected["prompt"]["mean_loss"]));
  report(tag + " grad_norm rel err", rel_err(r.grad_norm, expected["prompt"]["grad_norm"]));
  report(tag + " param_grad_norms max rel err", max_param_err);
  EXPECT_LE(max_logit_err, tol.logits);
  EXPECT_LE(rel_err(r.loss, expected["prompt"]["mean_loss"]), tol.rel);
  EXPECT_LE(rel_err(r.grad_norm, expected["prompt"]["grad_norm"]), tol.rel);
  EXPECT_LE(max_param_err, 10 * tol.rel);

  double max_weight_err = 0.0;
  const auto routing = routing_of(dynamic_cast<models::Transformer&>(*model), ids);
  EXPECT_EQ(routing.size(), expected["moe_layers"].size());
  for (const auto& [layer, layer_routing] : routing) {
    const auto& want_layer = expected["prompt"]["routing"]["layers"][layer];
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto want_experts = want_layer["selected_experts"][t].get<std::vector<int64_t>>();
      const auto want_weights = want_layer["combine_weights"][t].get<std::vector<double>>();
      for (size_t j = 0; j < want_experts.size(); ++j) {
        EXPECT_EQ(layer_routing.experts[t][j].item<int64_t>(), want_experts[j])
            << tag << " layer " << layer << " token " << t;
        max_weight_err = std::max(
            max_weight_err, std::abs(layer_routing.gates[t][j].item<double>() - want_weights[j]));
      }
    }
  }
  report(tag + " combine weights max abs err", max_weight_err);
  EXPECT_LE(max_weight_err, tol.weights);

  models::GenerateOptions greedy;
  greedy.max_new_tokens = expected["greedy"]["num_new_tokens"];
  auto out = models::generate(*model, json_ids(expected["greedy"]["start_ids"]), greedy);
  EXPECT_EQ(out, json_ids(expected["greedy"]["ids"])) << tag << " greedy ids";
  return model;
}

}  // namespace titan::testing
