#include "titan/components/lr_scheduler.h"

#include <cmath>

#include "titan/platform/logging.h"

namespace titan::components {

LrScheduler::LrScheduler(const config::LrSchedulerSection& c, double lr, int64_t training_steps)
    : lr_(lr), decay_type_(c.decay_type), min_lr_factor_(c.min_lr_factor) {
  warmup_ = c.warmup_steps;
  if (warmup_ > training_steps) {
    log::warn("lr_scheduler.warmup_steps ({}) exceeds training.steps ({}); warming up over {} "
              "steps",
              warmup_, training_steps, training_steps);
    warmup_ = training_steps;
  }
  if (c.decay_ratio) {
    // Python's round(): halves to even.
    decay_ = static_cast<int64_t>(std::nearbyint(static_cast<double>(training_steps) *
                                                 *c.decay_ratio));
    if (warmup_ + decay_ > training_steps) {
      log::warn("lr_scheduler: warmup ({}) + decay ({}) steps exceed training.steps ({}); "
                "decaying over {} steps",
                warmup_, decay_, training_steps, training_steps - warmup_);
      decay_ = training_steps - warmup_;
    }
  } else {
    decay_ = training_steps - warmup_;
  }
  // TorchTitan's virtual last step: the decay ends one step after the run, so the last step
  // still trains with a positive learning rate.
  stable_ = training_steps + 1 - warmup_ - decay_;
}

double LrScheduler::factor_at(int64_t step) const {
  const int64_t s = step - 1;  // TorchTitan's 0-based scheduler step
  if (s < warmup_) return static_cast<double>(s + 1) / static_cast<double>(warmup_);
  if (s < warmup_ + stable_) return 1.0;
  const double progress =
      static_cast<double>(s + 1 - warmup_ - stable_) / static_cast<double>(decay_);
  double f = 1.0 - progress;
  if (decay_type_ == "sqrt") f = 1.0 - std::sqrt(progress);
  if (decay_type_ == "cosine") f = 0.5 * (1.0 + std::cos(M_PI * progress));
  return min_lr_factor_ + (1.0 - min_lr_factor_) * f;
}

double LrScheduler::lr_at(int64_t step) const { return lr_ * factor_at(step); }

}  // namespace titan::components
