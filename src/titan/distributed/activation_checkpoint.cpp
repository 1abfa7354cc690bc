#include "titan/distributed/activation_checkpoint.h"

#include <ATen/core/ivalue.h>

#include "titan/errors.h"
#include "titan/models/common/weight_module.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a checkpointed block needs to run again in backward.
struct BlockState : torch::CustomClassHolder {
  models::CausalLM::TensorFn forward;
  std::vector<models::WeightModule*> modules;
};

// Forward without saving activations; backward reruns the block with the same weights
// (passed as inputs so their gradients flow on, e.g. into FSDP's reduce-scatter).
struct CheckpointFn : public torch::autograd::Function<CheckpointFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               at::TensorList weights, c10::intrusive_ptr<BlockState> state) {
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    torch::NoGradGuard no_grad;
    return state->forward(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto state = c10::static_intrusive_pointer_cast<BlockState>(
        ctx->saved_data["state"].toCapsule());
    auto saved = ctx->get_saved_variables();
    std::vector<torch::Tensor> inputs;
    for (const auto& t : saved) inputs.push_back(t.detach().requires_grad_(true));
    std::vector<torch::Tensor> previous;
    for (size_t i = 0; i < state->modules.size(); ++i) {
      previous.push_back(state->modules[i]->weight);
      state->modules[i]->weight = inputs[i + 1];
    }
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = state->forward(inputs[0]);
    }
    for (size_t i = 0; i < state->modules.size(); ++i) state->modules[i]->weight = previous[i];
    auto grads = torch::autograd::grad({out}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    grads.emplace_back();  // no gradient for the state
    return grads;
  }
};

}  // namespace

bool is_checkpointed(const config::ActivationCheckpointSection& ac, int64_t layer) {
  if (ac.mode == "full") return true;
  if (ac.mode != "selective") return false;
  int64_t every = std::stoll(ac.selective_ac_option);
  return (layer + 1) % every == 0;
}

void apply_activation_checkpointing(models::CausalLM& model,
                                    const config::ActivationCheckpointSection& ac) {
  if (ac.mode == "none") return;
  if (ac.mode == "selective" && ac.selective_ac_option == "op") {
    throw ConfigError("activation_checkpoint.selective_ac_option = 'op' (per-op selective "
                      "checkpointing) is not supported by this build; use a number N (every "
                      "N-th block) or activation_checkpoint.mode = 'full'");
  }
  auto blocks = model.blocks();
  std::vector<std::vector<models::WeightModule*>> block_modules;
  for (size_t i = 0; i < blocks->size(); ++i) {
    block_modules.push_back(models::weight_modules(*blocks[i]));
  }
  model.add_block_wrapper([ac, block_modules](int64_t layer, const torch::Tensor& x,
                                              const models::CausalLM::TensorFn& inner) {
    if (!is_checkpointed(ac, layer) || !torch::GradMode::is_enabled()) return inner(x);
    auto state = c10::make_intrusive<BlockState>();
    state->forward = inner;
    state->modules = block_modules.at(layer);
    std::vector<torch::Tensor> weights;
    for (auto* m : state->modules) weights.push_back(m->weight);
    return CheckpointFn::apply(x, at::TensorList(weights), state);
  });
}

}  // namespace titan::distributed
