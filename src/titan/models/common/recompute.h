// Whether this thread is running a block's forward again for activation checkpointing's
// backward, so that side effects of a forward (the experts' token counts) happen once per
// step, not again in the recompute.
#pragma once

namespace titan::models {

bool is_recomputing();

/// Marks the current thread as recomputing for the scope's lifetime (activation_checkpoint.h).
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool previous_;
};

}  // namespace titan::models
