// The one way titan passes C++ state (a process group, an FSDP unit, a callback to rerun)
// through a torch::autograd::Function: apply() takes it as an argument made by
// autograd_state(value), forward stores it in the context with save_state(), and backward
// reads it back with saved_state<T>(). The autograd graph owns the state until backward has
// run, so a callback's captures stay alive as long as the graph needs them.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace titan::platform {

template <typename T>
struct AutogradState : torch::CustomClassHolder {
  explicit AutogradState(T v) : value(std::move(v)) {}
  T value;
};

template <typename T>
c10::intrusive_ptr<AutogradState<T>> autograd_state(T value) {
  return c10::make_intrusive<AutogradState<T>>(std::move(value));
}

template <typename T>
void save_state(torch::autograd::AutogradContext* ctx,
                const c10::intrusive_ptr<AutogradState<T>>& state) {
  ctx->saved_data["state"] = c10::IValue::make_capsule(state);
}

/// The state save_state() stored (alive while `ctx` is).
template <typename T>
T& saved_state(torch::autograd::AutogradContext* ctx) {
  auto holder = ctx->saved_data["state"].toCapsule();
  return static_cast<AutogradState<T>*>(holder.get())->value;
}

}  // namespace titan::platform
