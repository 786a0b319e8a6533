// budget.cpp — see budget.h.
#include "lib/train/budget.h"

#include <fmt/format.h>

#include <cmath>

namespace hg {

TimeBudget::TimeBudget(Trainer& trainer_, const BudgetPlan& plan, std::function<double()> train_seconds_)
    : trainer(trainer_), train_seconds(std::move(train_seconds_)) {
    const TrainConfig& c = trainer.cfg;
    if (!(c.time_budget > 0)) return;
    step_estimate = plan.step_seconds;
    replan_at = c.schedule.warmup_iters >= 20 ? c.schedule.warmup_iters : -1;
    // With a re-plan at the warmup's end, the tenths start after it; without, at the first tenth.
    next_replan = replan_at > 0 ? 1e300 : c.time_budget / 10;
    replan_t0 = plan.spent;
}

std::optional<Replanned> TimeBudget::replan_if_due() {
    const TrainConfig& c = trainer.cfg;
    if (!(c.time_budget > 0)) return std::nullopt;
    const int iter = trainer.progress.iter_num;
    if (replan_at > 0 && iter == replan_at / 2) {  // the warmup's second half is timed from here
        replan_t0 = train_seconds();
        replan_iter0 = iter;
    }
    Replanned r;
    if (replan_at > 0 && iter == replan_at) {
        r.end_of_warmup = true;
    } else if (!(iter > replan_iter0 && iter >= c.schedule.warmup_iters && iter < c.max_iters &&
                 next_replan < 0.95 * c.time_budget &&
                 dist_any(trainer.dist, train_seconds() >= next_replan))) {
        return std::nullopt;
    }
    const double used_here = train_seconds();
    r.step_seconds = (used_here - replan_t0) / (iter - replan_iter0);
    r.used = dist_mean(trainer.dist, used_here);  // every rank then sets the same next_replan
    r.iters = trainer.replan_time_budget(c.time_budget - r.used, r.step_seconds);
    step_estimate = r.step_seconds;
    replan_t0 = r.used;
    replan_iter0 = iter;
    next_replan = (std::floor(10 * r.used / c.time_budget) + 1) * c.time_budget / 10;
    return r;
}

bool TimeBudget::clock_stops() {
    const TrainConfig& c = trainer.cfg;
    if (!(c.time_budget > 0) || trainer.progress.iter_num >= c.max_iters) return false;
    return dist_any(trainer.dist, train_seconds() + step_estimate > c.time_budget);
}

std::string replay_flags(const TrainConfig& c, int iters) {
    const std::string replans = to_string(c.schedule.replans);
    return fmt::format("--max_iters={} --lr_decay_iters={} --warmup_iters={}{} --time_budget=0", iters,
                       c.schedule.lr_decay_iters, c.schedule.warmup_iters,
                       replans.empty() ? "" : " --lr_replans=" + replans);
}

}  // namespace hg
