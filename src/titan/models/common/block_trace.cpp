#include "titan/models/common/block_trace.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/engine.h>

#include <atomic>
#include <memory>

#include "titan/platform/autograd_state.h"

namespace titan::models {
namespace {

using platform::MemoryCategory;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int> g_tracing{0};

// One piece's backward, opened by OpenBackward and closed by CloseBackward, or at the end of
// the backward pass when that never runs (a pass that stops before the piece's input: a
// pipeline's weight-only backward).
struct BackwardRange {
  TracedPiece piece;
  platform::MemoryTag saved;
  bool open = false;

  void close() {
    if (!open) return;
    open = false;
    RECORD_USER_SCOPE(piece.name() + " backward ends");
    platform::set_memory_tag(saved);
  }
};
using RangeState = c10::intrusive_ptr<platform::AutogradState<std::shared_ptr<BackwardRange>>>;

// On the piece's result (kOpens: backward reaches it first) or on its input (backward reaches
// it once the whole piece is done).
template <bool kOpens>
struct BackwardMarker : public torch::autograd::Function<BackwardMarker<kOpens>> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& t,
                               const RangeState& state) {
    platform::save_state(ctx, state);
    return t;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto range = platform::saved_state<std::shared_ptr<BackwardRange>>(ctx);
    if constexpr (kOpens) {
      RECORD_USER_SCOPE(range->piece.name() + " backward");
      range->saved = platform::current_memory_tag();
      range->open = true;
      platform::set_memory_tag(range->piece.backward_tag());
      torch::autograd::Engine::get_default_engine().queue_callback([range] { range->close(); });
    } else {
      range->close();
    }
    return {grads[0], torch::Tensor()};
  }
};
using OpenBackward = BackwardMarker<true>;
using CloseBackward = BackwardMarker<false>;

}  // namespace

void set_tracing(bool on) { g_tracing.fetch_add(on ? 1 : -1); }
bool tracing() { return g_tracing.load() > 0; }

std::string TracedPiece::name() const {
  if (layer == kOutput) return "output";
  if (layer == kLoss) return "loss";
  return fmt::format("layers.{}", layer);
}

platform::MemoryTag TracedPiece::forward_tag() const {
  if (layer < 0) return {MemoryCategory::Loss, -1};
  return {MemoryCategory::Activations, static_cast<int32_t>(layer)};
}

platform::MemoryTag TracedPiece::backward_tag() const {
  if (layer < 0) return {MemoryCategory::Loss, -1};
  return {MemoryCategory::ActivationGradients, static_cast<int32_t>(layer)};
}

TracedForward::TracedForward(TracedPiece piece)
    : range_(at::RecordScope::USER_SCOPE),
      memory_(piece.forward_tag().category, piece.forward_tag().block) {
  // The name is formatted only while a profiler records.
  if (range_.isActive()) range_.before(piece.name() + " forward");
}

torch::Tensor with_traced_backward(TracedPiece piece, const torch::Tensor& x,
                                   const std::function<torch::Tensor(const torch::Tensor&)>& fn) {
  if (!tracing() || !torch::GradMode::is_enabled() || !x.requires_grad()) return fn(x);
  auto state =
      platform::autograd_state(std::make_shared<BackwardRange>(BackwardRange{piece, {}, false}));
  auto y = fn(CloseBackward::apply(x, state));
  return y.requires_grad() ? OpenBackward::apply(y, state) : y;
}

}  // namespace titan::models
