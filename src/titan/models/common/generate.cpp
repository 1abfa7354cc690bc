#include "titan/models/common/generate.h"

#include <fmt/format.h>

#include <limits>

#include "titan/errors.h"
#include "titan/models/common/init.h"

namespace titan::models {
namespace {

torch::Device model_device(CausalLM& model) {
  auto params = model.parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

void check_ids(const std::vector<int64_t>& ids, int64_t vocab) {
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab) {
      throw ConfigError(fmt::format("token id {} is outside the model's vocabulary [0, {})", id,
                                    vocab));
    }
  }
}

// ids: n values -> [1, n] int64 on `device`.
torch::Tensor as_batch(const std::vector<int64_t>& ids, torch::Device device) {
  return torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);  // [1, n]
}

}  // namespace

std::vector<int64_t> generate(CausalLM& model, const std::vector<int64_t>& prompt,
                              const GenerateOptions& options) {
  if (prompt.empty()) {
    throw ConfigError("generate: the prompt needs at least one token id");
  }
  if (options.max_new_tokens < 0 || options.temperature < 0.0 || options.top_k < 0) {
    throw ConfigError(fmt::format("generate: max_new_tokens ({}), temperature ({}) and top_k ({}) "
                                  "must not be negative",
                                  options.max_new_tokens, options.temperature, options.top_k));
  }
  check_ids(prompt, model.shape().vocab_size);
  torch::NoGradGuard no_grad;
  const auto device = model_device(model);
  auto gen = seeded_generator(options.seed);
  std::vector<int64_t> ids = prompt;
  std::vector<int64_t> out;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    auto logits = model.forward(as_batch(ids, device));                 // logits: [1, n, V]
    auto last = logits.select(1, -1).squeeze(0).to(torch::kCPU, torch::kFloat64);  // last: [V]
    int64_t next;
    if (options.temperature == 0.0) {
      next = last.argmax().item<int64_t>();
    } else {
      auto scaled = last / options.temperature;  // scaled: [V]
      if (options.top_k > 0 && options.top_k < scaled.size(0)) {
        auto kth = std::get<0>(scaled.topk(options.top_k)).min();  // kth: []
        scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<double>::infinity());
      }
      auto probs = torch::softmax(scaled, 0);  // probs: [V]
      next = torch::multinomial(probs, 1, /*replacement=*/false, gen).item<int64_t>();
    }
    ids.push_back(next);
    out.push_back(next);
  }
  return out;
}

double prompt_loss(CausalLM& model, const std::vector<int64_t>& ids) {
  if (ids.size() < 2) {
    throw ConfigError("score: the prompt needs at least two token ids to predict one");
  }
  check_ids(ids, model.shape().vocab_size);
  torch::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(ids.size());
  auto tokens = as_batch(ids, model_device(model));                   // tokens: [1, n]
  auto logits = model.forward(tokens).squeeze(0).narrow(0, 0, n - 1);  // logits: [n-1, V]
  auto targets = tokens.squeeze(0).narrow(0, 1, n - 1);               // targets: [n-1]
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat64), targets).item<double>();
}

}  // namespace titan::models
