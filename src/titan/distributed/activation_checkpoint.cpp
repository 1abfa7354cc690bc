#include "titan/distributed/activation_checkpoint.h"

#include <ATen/core/ivalue.h>

#include "titan/models/common/feed_forward.h"
#include "titan/models/common/rmsnorm.h"
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

// What a recomputed elementwise op needs to run again in backward.
struct OpState : torch::CustomClassHolder {
  models::ElementwiseOp::Fn fn;
};

// Forward keeps only the op's inputs; backward reruns the op on them and differentiates it.
struct RecomputeFn : public torch::autograd::Function<RecomputeFn> {
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList inputs,
                               c10::intrusive_ptr<OpState> state) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    torch::NoGradGuard no_grad;
    return state->fn(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto state = c10::static_intrusive_pointer_cast<OpState>(ctx->saved_data["state"].toCapsule());
    std::vector<torch::Tensor> inputs;
    for (const auto& t : ctx->get_saved_variables()) inputs.push_back(t.detach().requires_grad_(true));
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = state->fn(inputs);
    }
    auto grads = torch::autograd::grad({out}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    grads.emplace_back();  // no gradient for the state
    return grads;
  }
};

torch::Tensor recompute_in_backward(const std::vector<torch::Tensor>& inputs,
                                    const models::ElementwiseOp::Fn& fn) {
  if (!torch::GradMode::is_enabled()) return fn(inputs);
  auto state = c10::make_intrusive<OpState>();
  state->fn = fn;
  return RecomputeFn::apply(at::TensorList(inputs), state);
}

// Op-level selective checkpointing: every norm and SwiGLU gate of the blocks recomputes.
void apply_op_checkpointing(models::CausalLM& model) {
  auto blocks = model.blocks();
  for (const auto& block : *blocks) {
    for (const auto& m : block->modules()) {
      if (auto* norm = m->as<models::RMSNormImpl>()) norm->compute.runner = recompute_in_backward;
      if (auto* ffn = m->as<models::FeedForwardImpl>()) ffn->gate.runner = recompute_in_backward;
    }
  }
}

bool is_op_level(const config::ActivationCheckpointSection& ac) {
  return ac.mode == "selective" && ac.selective_ac_option == "op";
}

}  // namespace

bool is_checkpointed(const config::ActivationCheckpointSection& ac, int64_t layer) {
  if (ac.mode == "full") return true;
  if (ac.mode != "selective" || is_op_level(ac)) return false;
  int64_t every = std::stoll(ac.selective_ac_option);
  return (layer + 1) % every == 0;
}

void apply_activation_checkpointing(models::CausalLM& model,
                                    const config::ActivationCheckpointSection& ac) {
  if (ac.mode == "none") return;
  if (is_op_level(ac)) return apply_op_checkpointing(model);
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
