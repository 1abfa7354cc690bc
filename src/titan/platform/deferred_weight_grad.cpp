#include "titan/platform/deferred_weight_grad.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <set>
#include <unordered_set>
#include <utility>

namespace titan::platform {
namespace {

using torch::autograd::Node;
using Cut = std::set<std::pair<Node*, size_t>>;  // (node, input) edges not to cross

thread_local WeightGradRecorder* recording = nullptr;

// What a backward from some node runs: its nodes and the leaves whose gradient accumulators
// it reaches.
struct Reach {
  std::unordered_set<Node*> nodes;
  std::unordered_set<c10::TensorImpl*> leaves;

  void add(const Reach& o) {
    nodes.insert(o.nodes.begin(), o.nodes.end());
    leaves.insert(o.leaves.begin(), o.leaves.end());
  }
  bool shares_a_node(const Reach& o) const {
    for (auto* n : o.nodes) {
      if (nodes.count(n)) return true;
    }
    return false;
  }
  bool has(const torch::Tensor& leaf) const { return leaves.count(leaf.unsafeGetTensorImpl()); }
};

// The graph from `start`, not crossing `cut`.
Reach reach_from(Node* start, const Cut& cut) {
  Reach r;
  std::vector<Node*> stack = {start};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!node || !r.nodes.insert(node).second) continue;
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      r.leaves.insert(acc->variable.unsafeGetTensorImpl());
      continue;
    }
    for (size_t i = 0; i < node->num_outputs(); ++i) {
      const auto& edge = node->next_edge(i);
      if (edge.is_valid() && !cut.count({node, i})) stack.push_back(edge.function.get());
    }
  }
  return r;
}

// The engine's walk from `output` with `slots` deferring: what it runs, and which slots it must
// take back (marked in `walked_slots`) because their weights' paths share a node with it (FSDP's
// gather of a unit whose other weights the walk reaches runs once, with all its gradients).
Reach walk(const torch::Tensor& output, const std::vector<DeferredWeightGrad*>& slots,
           std::vector<bool>& walked_slots) {
  Cut cut;
  for (auto* s : slots) cut.insert({s->node(), s->weight_input()});
  Reach walked = reach_from(output.grad_fn().get(), cut);
  std::vector<Reach> weights;
  for (auto* s : slots) weights.push_back(reach_from(s->weight_edge().function.get(), {}));
  walked_slots.assign(slots.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (walked_slots[i] || !walked.shares_a_node(weights[i])) continue;
      walked_slots[i] = grew = true;
      walked.add(weights[i]);
    }
  }
  return walked;
}

}  // namespace

void DeferredWeightGrad::defer(Compute compute) {
  if (!closed_) compute_ = std::move(compute);
}

WeightGradRecorder::Recording::Recording(WeightGradRecorder& recorder) : previous_(recording) {
  recording = &recorder;
}

WeightGradRecorder::Recording::~Recording() { recording = previous_; }

std::vector<torch::Tensor> WeightGradRecorder::undeferrable(
    const torch::Tensor& output, const std::vector<torch::Tensor>& parameters) const {
  std::vector<DeferredWeightGrad*> slots;
  for (const auto& s : slots_) {
    if (s->node_) slots.push_back(s.get());
  }
  std::vector<bool> walked_slots;
  const Reach walked = walk(output, slots, walked_slots);
  std::vector<torch::Tensor> out;
  for (const auto& p : parameters) {
    if (p.requires_grad() && walked.has(p)) out.push_back(p);
  }
  return out;
}

WeightPassCounts WeightGradRecorder::backward(const torch::Tensor& output,
                                              const torch::Tensor& output_grad,
                                              const std::vector<torch::Tensor>& parameters) {
  std::vector<DeferredWeightGrad*> slots;
  std::vector<DeferredWeightGrad::Compute> computes;
  for (const auto& s : slots_) {
    s->closed_ = true;  // the walk below may run their backward again
    if (s->compute_ && s->node_) {
      slots.push_back(s.get());
      computes.push_back(std::exchange(s->compute_, nullptr));
    }
  }
  std::vector<bool> walked_slots;
  const Reach walked = walk(output, slots, walked_slots);
  std::vector<torch::Tensor> walk_inputs;
  for (const auto& p : parameters) {
    if (p.requires_grad() && walked.has(p)) walk_inputs.push_back(p);
  }
  // The walk first: the ops it passes through read their weights, which the deferred
  // gradients' own nodes (FSDP's gather) may free once they have run.
  if (!walk_inputs.empty()) {
    std::vector<torch::Tensor> out_grads;
    if (output_grad.defined()) out_grads.push_back(output_grad);
    torch::autograd::backward({output}, out_grads, /*retain_graph=*/true,
                              /*create_graph=*/false, walk_inputs);
  }
  torch::autograd::edge_list roots;
  torch::autograd::variable_list grads;
  Reach deferred;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (walked_slots[i]) continue;
    const auto& edge = slots[i]->weight_edge();
    torch::NoGradGuard no_grad;  // as in the engine's backward
    roots.push_back(edge);
    grads.push_back(computes[i]());
    deferred.add(reach_from(edge.function.get(), {}));
  }
  computes.clear();  // frees what they kept
  if (!roots.empty()) {
    torch::autograd::Engine::get_default_engine().execute(
        roots, grads, /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/true);
  }
  slots_.clear();
  WeightPassCounts counts;
  counts.walked = static_cast<int>(walk_inputs.size());
  for (const auto& p : parameters) counts.deferred += deferred.has(p) && !walked.has(p) ? 1 : 0;
  return counts;
}

bool recording_weight_grads() { return recording && torch::GradMode::is_enabled(); }

DeferredWeightGradPtr deferrable_weight_grad() {
  if (!recording_weight_grads()) return {};
  auto slot = c10::make_intrusive<DeferredWeightGrad>();
  recording->slots_.push_back(slot);
  return slot;
}

void bind(const DeferredWeightGradPtr& slot, const torch::Tensor& output, size_t weight_input) {
  if (!slot || !output.grad_fn()) return;
  slot->node_ = output.grad_fn().get();
  slot->weight_input_ = weight_input;
}

void save_slot(torch::autograd::AutogradContext* ctx, const DeferredWeightGradPtr& slot) {
  if (slot) ctx->saved_data["deferred_weight_grad"] = c10::IValue::make_capsule(slot);
}

torch::Tensor weight_grad(torch::autograd::AutogradContext* ctx, size_t weight_input,
                          const DeferredWeightGrad::Compute& compute) {
  if (ctx->needs_input_grad(weight_input)) return compute();
  auto it = ctx->saved_data.find("deferred_weight_grad");
  if (it != ctx->saved_data.end()) {
    c10::static_intrusive_pointer_cast<DeferredWeightGrad>(it->second.toCapsule())->defer(compute);
  }
  return {};
}

}  // namespace titan::platform
