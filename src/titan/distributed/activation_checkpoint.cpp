#include "titan/distributed/activation_checkpoint.h"

#include <map>

#include "titan/models/common/recompute.h"
#include "titan/models/common/transformer_block.h"
#include "titan/models/common/weight_module.h"
#include "titan/platform/autograd_state.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a checkpointed block needs to run again in backward.
struct BlockState {
  models::CausalLM::TensorFn forward;
  std::vector<models::WeightModule*> modules;
};
using BlockStatePtr = c10::intrusive_ptr<platform::AutogradState<BlockState>>;

// Forward without saving activations; backward reruns the block with the same weights
// (passed as inputs so their gradients flow on, e.g. into FSDP's reduce-scatter).
struct CheckpointFn : public torch::autograd::Function<CheckpointFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               at::TensorList weights, const BlockStatePtr& state) {
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    platform::save_state(ctx, state);
    torch::NoGradGuard no_grad;
    return state->value.forward(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* state = &platform::saved_state<BlockState>(ctx);
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
      models::RecomputeScope recompute;
      out = state->forward(inputs[0]);
    }
    for (size_t i = 0; i < state->modules.size(); ++i) state->modules[i]->weight = previous[i];
    auto grads = torch::autograd::grad({out}, inputs, {grad_out[0]}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    grads.emplace_back();  // no gradient for the state
    return grads;
  }
};

using OpFnPtr = c10::intrusive_ptr<platform::AutogradState<models::ElementwiseOp::Fn>>;

// Forward keeps only the op's inputs; backward reruns the op on them and differentiates it.
struct RecomputeFn : public torch::autograd::Function<RecomputeFn> {
  static torch::Tensor forward(AutogradContext* ctx, at::TensorList inputs, const OpFnPtr& fn) {
    ctx->save_for_backward(inputs.vec());
    platform::save_state(ctx, fn);
    torch::NoGradGuard no_grad;
    return fn->value(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto& fn = platform::saved_state<models::ElementwiseOp::Fn>(ctx);
    std::vector<torch::Tensor> inputs;
    for (const auto& t : ctx->get_saved_variables()) {
      inputs.push_back(t.detach().requires_grad_(true));
    }
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      out = fn(inputs);
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
  return RecomputeFn::apply(at::TensorList(inputs), platform::autograd_state(fn));
}

// Op-level selective checkpointing: the ops each block names (its norms, the parts' norms and
// gates) recompute.
void apply_op_checkpointing(models::CausalLM& model) {
  for (const auto& block : model.blocks()) {
    for (auto* op : block.module->recomputed_ops()) op->runner = recompute_in_backward;
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
  std::map<int64_t, std::vector<models::WeightModule*>> block_modules;  // by global layer id
  for (const auto& block : model.blocks()) {
    block_modules[block.layer_id] = models::weight_modules(*block.module);
  }
  model.add_block_wrapper([ac, block_modules](int64_t layer, const torch::Tensor& x,
                                              const models::CausalLM::TensorFn& inner) {
    if (!is_checkpointed(ac, layer) || !torch::GradMode::is_enabled()) return inner(x);
    auto state = platform::autograd_state(BlockState{inner, block_modules.at(layer)});
    std::vector<torch::Tensor> weights;
    for (auto* m : state->value.modules) weights.push_back(m->weight);
    return CheckpointFn::apply(x, at::TensorList(weights), state);
  });
}

}  // namespace titan::distributed
