// The model's pieces as the profiler and memory snapshots see them. Each block ("layers.<id>"),
// the output ("output": final norm and logits) and the loss ("loss") runs its forward as a profiler
// range
// "<name> forward" with its CPU allocations counted as its activations (the output's and loss's as
// loss). While tracing is on (the profiler records, or a memory snapshot is taken) and autograd
// records the piece, two identity autograd nodes around it count its backward's allocations as its
// activation gradients (the output's and loss's as loss): the node on its result runs first in
// backward and sets the tag, the node on its input runs last and restores it (or the end of
// the backward pass, when it stops short of the piece's input). They also leave
// the profiler two short ranges, "<name> backward" and "<name> backward ends", which
// tools/trace_pieces.h joins into one span (a range cannot outlive the autograd node it starts
// in and stay nested). Tracing off, nothing is added to the graph.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "titan/platform/memory.h"

namespace titan::models {

/// Counted: every set_tracing(true) is matched by a set_tracing(false).
void set_tracing(bool on);
bool tracing();

/// A piece of the model: block `layer` (a global layer id), or the output or the loss.
struct TracedPiece {
  static constexpr int64_t kOutput = -1, kLoss = -2;
  int64_t layer = kOutput;

  /// "layers.<id>", "output" or "loss".
  std::string name() const;
  platform::MemoryTag forward_tag() const;
  platform::MemoryTag backward_tag() const;
};

/// The piece's forward range and memory tag, for this object's life.
class TracedForward {
 public:
  explicit TracedForward(TracedPiece piece);
  TracedForward(const TracedForward&) = delete;
  TracedForward& operator=(const TracedForward&) = delete;

 private:
  at::RecordFunction range_;
  platform::MemoryScope memory_;
};

/// fn(x), whose backward is the piece's backward range and memory tag while tracing.
torch::Tensor with_traced_backward(TracedPiece piece, const torch::Tensor& x,
                                   const std::function<torch::Tensor(const torch::Tensor&)>& fn);

}  // namespace titan::models
