// schedule.cpp — see schedule.h.
#include "lib/schedule.h"

#include <cmath>

#include "lib/errors.h"

namespace hg {

void validate(const LrSchedule& s) {
    check(std::isfinite(s.learning_rate) && s.learning_rate >= 0,
          "learning_rate must be a finite number >= 0, got {}", s.learning_rate);
    if (!s.decay_lr) return;
    check(std::isfinite(s.min_lr) && s.min_lr >= 0, "min_lr must be a finite number >= 0, got {}",
          s.min_lr);
    check(s.min_lr <= s.learning_rate, "min_lr ({}) must not exceed learning_rate ({})", s.min_lr,
          s.learning_rate);
    check(s.warmup_iters >= 0, "warmup_iters must be >= 0, got {}", s.warmup_iters);
    check(s.lr_decay_iters >= 0, "lr_decay_iters must be >= 0, got {}", s.lr_decay_iters);
    check(s.warmup_iters <= s.lr_decay_iters, "warmup_iters ({}) must not exceed lr_decay_iters ({})",
          s.warmup_iters, s.lr_decay_iters);
}

double lr_at(const LrSchedule& s, int iter) {
    check(iter >= 0, "the iteration must be >= 0, got {}", iter);
    if (!s.decay_lr) return s.learning_rate;
    // 1) linear warmup; (iter + 1) so that iteration 0 already gets a nonzero lr
    if (iter < s.warmup_iters) return s.learning_rate * (iter + 1) / (s.warmup_iters + 1);
    // 2) after the decay: the floor (also covers an empty cosine phase, see schedule.h)
    if (iter > s.lr_decay_iters || s.lr_decay_iters == s.warmup_iters) return s.min_lr;
    // 3) in between: cosine from learning_rate (ratio 0) down to min_lr (ratio 1)
    double ratio = double(iter - s.warmup_iters) / double(s.lr_decay_iters - s.warmup_iters);
    double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
    return s.min_lr + coeff * (s.learning_rate - s.min_lr);
}

}  // namespace hg
