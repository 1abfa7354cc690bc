#include "titan/models/common/causal_lm.h"

#include <unordered_set>

#include "titan/models/common/block_trace.h"
#include "titan/models/common/transformer_block.h"
#include "titan/models/common/weight_module.h"

namespace titan::models {

int64_t CausalLM::num_params() {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  for (const auto& p : parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) {
      total += p.numel();
    }
  }
  return total;
}

int64_t CausalLM::num_active_params() {
  int64_t unused = 0;
  for (const auto& block : blocks()) {
    for (const auto* part : block.module->parts()) unused += part->unused_params_per_token();
  }
  return num_params() - unused;
}

void CausalLM::init_weights(uint64_t seed) {
  for (const auto& [name, module] : weight_modules_by_name(*this)) {
    init_rows(module->weight, 0, name, module->init, seed);
  }
}

torch::Tensor CausalLM::forward(const torch::Tensor& input, const ClassifierLoss& loss) {
  platform::MemoryScope activations(platform::MemoryCategory::Activations);
  return run_wrapped(model_wrappers_, -1, input,
                     [this, &loss](const torch::Tensor& t) { return forward_impl(t, loss); });
}

torch::Tensor CausalLM::run_block(int64_t layer, const torch::Tensor& x, const TensorFn& block) {
  // The forward range covers the block's own compute, inside its wrappers (FSDP's gather);
  // the backward range the whole block, wrappers included.
  const auto named = [layer, block](const torch::Tensor& input) {
    TracedForward traced({layer});
    return block(input);
  };
  return with_traced_backward({layer}, x, [&](const torch::Tensor& input) {
    return run_wrapped(block_wrappers_, layer, input, named);
  });
}

torch::Tensor CausalLM::run_wrapped(const std::vector<Wrapper>& wrappers, int64_t layer,
                                    const torch::Tensor& x, const TensorFn& inner) {
  TensorFn fn = inner;
  for (const auto& w : wrappers) {
    fn = [w, layer, fn](const torch::Tensor& input) { return w(layer, input, fn); };
  }
  return fn(x);
}

}  // namespace titan::models
