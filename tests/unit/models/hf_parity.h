// Test helpers for the Hugging Face parity models under shared/data/models (stories260K,
// llama3_tiny, qwen3_tiny, qwen3_moe_tiny): load a folder through the registered TrainSpec, measure logits,
// loss and gradient norms, and compare with the float64 references in expected.json.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "titan/components/checkpoint/hf_folder.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/hf_adapter.h"
#include "titan/train/train_spec.h"

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
  const auto& spec = train::train_spec_for_hf_model_type(folder.config["model_type"]);
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
  for (const auto& item : model.named_parameters()) {
    for (const auto& [name, grad] : models::hf_tensors(item.key(), item.value().grad())) {
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

}  // namespace titan::testing
