// schedule.cpp — see schedule.h.
#include "lib/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lib/core/errors.h"

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
    if (s.decay == LrDecay::Wsd)
        check(s.cooldown_frac > 0 && s.cooldown_frac <= 1, "cooldown_frac must be in (0, 1], got {}",
              s.cooldown_frac);
    int after = s.warmup_iters;
    for (const Replan& p : s.replans) {
        check(p.iter >= after, "a re-plan at iter {} comes before the warmup's end or the previous re-plan ({})",
              p.iter, after);
        check(p.end > p.iter, "a re-plan at iter {} must end after it (end {})", p.iter, p.end);
        after = p.iter + 1;
    }
}

// How far the decay has gone at `iter` (>= warmup_iters): 0 at its start, 1 at its end and after.
static double decay_ratio(const LrSchedule& s, int iter) {
    int start = s.warmup_iters, end = s.lr_decay_iters;
    double r = 0;  // the ratio reached at `start`
    for (const Replan& p : s.replans) {
        if (p.iter > iter) break;
        if (end > start) r += (1 - r) * std::min(1.0, double(p.iter - start) / double(end - start));
        start = p.iter, end = p.end;
    }
    if (iter >= end) return 1.0;  // also an empty decay (end == start, see schedule.h)
    return r + (1 - r) * double(iter - start) / double(end - start);
}

// The decay's shape: 1 at ratio 0, down to 0 at ratio 1 (schedule.h).
static double decay_coeff(const LrSchedule& s, double ratio) {
    switch (s.decay) {
        case LrDecay::Linear: return 1.0 - ratio;
        case LrDecay::Wsd: {
            const double stable = 1.0 - s.cooldown_frac;
            return ratio < stable ? 1.0 : 1.0 - std::sqrt((ratio - stable) / s.cooldown_frac);
        }
        case LrDecay::Cosine: break;
    }
    return 0.5 * (1.0 + std::cos(M_PI * ratio));
}

double lr_at(const LrSchedule& s, int iter) {
    check(iter >= 0, "the iteration must be >= 0, got {}", iter);
    if (!s.decay_lr) return s.learning_rate;
    // 1) linear warmup; (iter + 1) so that iteration 0 already gets a nonzero lr
    if (iter < s.warmup_iters) return s.learning_rate * (iter + 1) / (s.warmup_iters + 1);
    // 2) at the end of the decay and after it: the floor
    const double ratio = decay_ratio(s, iter);
    if (ratio >= 1.0) return s.min_lr;
    // 3) in between: from learning_rate (ratio 0) down to min_lr (ratio 1)
    return s.min_lr + decay_coeff(s, ratio) * (s.learning_rate - s.min_lr);
}

LrDecay parse_lr_decay(const std::string& s) {
    if (s == "cosine") return LrDecay::Cosine;
    if (s == "linear") return LrDecay::Linear;
    if (s == "wsd") return LrDecay::Wsd;
    fail("unknown lr_decay '{}' (known: cosine, linear, wsd)", s);
}

const char* to_string(LrDecay d) { return d == LrDecay::Linear ? "linear" : d == LrDecay::Wsd ? "wsd" : "cosine"; }

std::vector<Replan> parse_replans(const std::string& s) {
    std::vector<Replan> out;
    size_t i = 0;
    while (i < s.size()) {
        const size_t comma = std::min(s.find(',', i), s.size());
        const std::string item = s.substr(i, comma - i);
        Replan p{};
        char tail = 0;
        check(std::sscanf(item.c_str(), "%d:%d%c", &p.iter, &p.end, &tail) == 2,
              "a re-plan must read ITER:END (got '{}' in '{}')", item, s);
        out.push_back(p);
        i = comma + 1;
    }
    return out;
}

std::string to_string(const std::vector<Replan>& replans) {
    std::string s;
    for (const Replan& p : replans) s += (s.empty() ? "" : ",") + std::to_string(p.iter) + ":" + std::to_string(p.end);
    return s;
}

}  // namespace hg
