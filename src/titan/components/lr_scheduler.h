// Learning-rate schedule as TorchTitan's (0.2.2) linear_warmup_stable_decay: linear warmup
// reaching lr at step warmup_steps, a stable phase, then decay (linear, sqrt or cosine) towards
// min_lr_factor * lr over the last decay_ratio of the run (all steps after warmup when
// decay_ratio is unset). As TorchTitan, the decay ends at a virtual step after the last one, so
// no step trains with lr 0 (tests/data/torchtitan_lr_schedules.json: TorchTitan's own output).
#pragma once

#include <cstdint>

#include "titan/config/job_config.h"

namespace titan::components {

class LrScheduler {
 public:
  /// Warmup longer than the run is shortened to the run (with a warning), as TorchTitan does.
  LrScheduler(const config::LrSchedulerSection& c, double lr, int64_t training_steps);

  /// Learning rate of training step `step` (1-based, the step the optimizer is about to take).
  double lr_at(int64_t step) const;
  /// The multiplier of optimizer.lr at `step` (1-based), in (0, 1].
  double factor_at(int64_t step) const;

 private:
  double lr_;
  int64_t warmup_;
  int64_t stable_;
  int64_t decay_;
  std::string decay_type_;
  double min_lr_factor_;
};

}  // namespace titan::components
