// A zero-bubble pipeline splits a backward in two: the input pass (I) computes only input
// gradients, the weight pass (W) the weights'. LibTorch's engine cannot resume a backward from
// the gradients I computed, so a W that asks the engine walks the whole graph again. Instead the
// ops that hold weights (Linear, the grouped expert GEMM, the eager RMSNorm's scaling and the
// fused RMSNorm, the fused loss) defer: when I runs their backward without asking for the weight's gradient, they keep what it
// needs (the layer's input and output gradient; or the gradient itself where computing it came
// free) in their DeferredWeightGrad, and W computes only those products, then sends each on from
// the weight the op saw to its parameter (through FSDP's gather or a cast: cheap nodes).
//
// An op takes part like this (its backward runs on any thread; forward on the recording one):
//   auto y = platform::apply_deferrable<Fn>(/*weight_input=*/1, x, w);  // Fn::apply(x, w, slot)
//   // Fn::forward: platform::save_slot(ctx, slot);
//   // Fn::backward: dw = platform::weight_grad(ctx, 1, [=] { return dy^T x; });
// Parameters that some other op reaches (an aten op reading a weight, a checkpointed region's
// recomputation) keep the engine's way: W walks the graph for those only, first, and folds in
// the deferred weights that share a node with that walk (a unit's FSDP gather runs once).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

namespace titan::platform {

/// One op's weight gradient, deferred by an input pass.
class DeferredWeightGrad : public torch::CustomClassHolder {
 public:
  using Compute = std::function<torch::Tensor()>;
  /// In the op's backward when its weight's gradient was not asked for: how W computes it
  /// (in the weight's dtype and shape). Ignored once W has run.
  void defer(Compute compute);

  /// The op's node once bound (null before), and the edge its weight's gradient leaves by.
  torch::autograd::Node* node() const { return node_; }
  const torch::autograd::Edge& weight_edge() const { return node_->next_edge(weight_input_); }
  size_t weight_input() const { return weight_input_; }

 private:
  friend class WeightGradRecorder;
  friend void bind(const c10::intrusive_ptr<DeferredWeightGrad>&, const torch::Tensor&, size_t);
  torch::autograd::Node* node_ = nullptr;  // the op's node: identity only (the graph owns it)
  size_t weight_input_ = 0;
  Compute compute_;
  bool closed_ = false;
};
using DeferredWeightGradPtr = c10::intrusive_ptr<DeferredWeightGrad>;

/// What one weight pass did: parameters given their gradient from deferred products, and those
/// whose gradient needed the engine's walk of the graph.
struct WeightPassCounts {
  int deferred = 0;
  int walked = 0;
};

/// The deferrable ops of the forwards run on this thread while a Recording of it is alive (one
/// recorder per microbatch in flight).
class WeightGradRecorder {
 public:
  /// After the forward: the `parameters` that an op which cannot defer reaches (a first stage's
  /// embedding), which an input pass without an input to differentiate computes itself.
  std::vector<torch::Tensor> undeferrable(const torch::Tensor& output,
                                          const std::vector<torch::Tensor>& parameters) const;

  /// W: the weight gradients of the graph from `output` (with `output_grad`, undefined for a
  /// scalar loss), accumulated into `parameters`' .grad (those the input pass did not give
  /// theirs). Each deferred product once; the parameters some op that did not defer reaches
  /// through the engine's walk of the graph. The graph's buffers are freed after.
  WeightPassCounts backward(const torch::Tensor& output, const torch::Tensor& output_grad,
                            const std::vector<torch::Tensor>& parameters);

  /// While alive, deferrable_weight_grad() on this thread records into `recorder`.
  class Recording {
   public:
    explicit Recording(WeightGradRecorder& recorder);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    WeightGradRecorder* previous_;
  };

 private:
  friend DeferredWeightGradPtr deferrable_weight_grad();
  std::vector<DeferredWeightGradPtr> slots_;
};

/// Whether this thread's forwards record: a Recording is alive and gradients are on.
bool recording_weight_grads();

/// A new slot of this thread's recorder; null when none records or gradients are off.
DeferredWeightGradPtr deferrable_weight_grad();

/// After Fn::apply: the op's node is `output`'s grad_fn and its weight is input `weight_input`.
/// Does nothing for a null slot or an output without a node.
void bind(const DeferredWeightGradPtr& slot, const torch::Tensor& output, size_t weight_input);

/// Fn::apply(args..., slot) with a slot of this thread's recorder (null when none), bound to
/// the op's node, whose input `weight_input` is the weight.
template <typename Fn, typename... Args>
auto apply_deferrable(size_t weight_input, Args&&... args) {
  auto slot = deferrable_weight_grad();
  auto out = Fn::apply(std::forward<Args>(args)..., slot);
  if constexpr (std::is_same_v<decltype(out), torch::Tensor>) {
    bind(slot, out, weight_input);
  } else {
    bind(slot, out.at(0), weight_input);
  }
  return out;
}

/// In Fn::forward: keeps `slot` (may be null) in the op's context.
void save_slot(torch::autograd::AutogradContext* ctx, const DeferredWeightGradPtr& slot);

/// In Fn::backward: compute() when the weight (input `weight_input`) has its gradient asked
/// for; else an undefined tensor, and compute deferred to the weight pass when the op recorded.
torch::Tensor weight_grad(torch::autograd::AutogradContext* ctx, size_t weight_input,
                          const DeferredWeightGrad::Compute& compute);

}  // namespace titan::platform
