// budget.h — a time-budgeted run as it goes: when to plan again, and when the clock stops it.
//
// Trainer::plan_time_budget lays the schedule over the iterations that fit in the budget, from
// a few timed steps. The run then plans again (Trainer::replan_time_budget) from the step time
// it measures itself:
//   - at the end of a warmup of at least 20 steps, from the time of the warmup's second half
//     (the first steps of a run are often slower; steps settle after the first few dozen);
//   - then each time another tenth of the budget is used (up to 95 % of it; never inside the
//     warmup, whose lr does not depend on the plan), from the steps
//     since the last plan: a machine's speed can drift by 10-20 % within minutes, and a run cut
//     short of its plan would miss the end of its decay, the steps that lower the loss most.
// Before each step it asks whether that step, at the latest step time, would overrun the
// budget; if so, the run stops there.
//
// The clock is the caller's: a function that returns the seconds of training so far (the
// planning's included, evaluation excluded), so a test drives all of this with a clock of its
// own. The clock decides only the plans and where the run stops: replay_flags gives the train
// flags that run the same iterations again without it, bit for bit. Under MPI every rank
// decides alike (the times are averaged over the ranks, and one rank's alarm stops them all).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "lib/train/trainer.h"

namespace hg {

// A re-plan, as it happened.
struct Replanned {
    bool end_of_warmup = false;  // the one at the warmup's end; otherwise a tenth of the budget
    double used = 0;             // seconds of training used when it came
    double step_seconds = 0;     // the step time it planned from
    int iters = 0;               // the iterations planned now (trainer.cfg.max_iters)
};

struct TimeBudget {
    // For `trainer` right after trainer.plan_time_budget() (or apply_budget_plan) gave `plan`.
    // Without a budget (cfg.time_budget == 0) it never re-plans nor stops anything.
    TimeBudget(Trainer& trainer, const BudgetPlan& plan, std::function<double()> train_seconds);
    // Before iteration trainer.progress.iter_num: re-plans if one is due and says so.
    std::optional<Replanned> replan_if_due();
    // Before that iteration's step, after replan_if_due: true when the step would overrun the
    // budget (the run stops before it).
    bool clock_stops();

    Trainer& trainer;
    std::function<double()> train_seconds;
    double step_estimate = 0;  // seconds per step: the plan's, then each re-plan's
    int replan_at = -1;        // the warmup's end, when it is long enough to time; else -1
    int replan_iter0 = 0;      // the iteration the current step time is measured from ...
    double replan_t0 = 0;      // ... and the seconds of training then
    double next_replan = 0;    // seconds of training at which the next tenth's re-plan is due
};

// The train flags that rerun `iters` iterations of trainer config `c`'s plan without a clock:
// "--max_iters=N --lr_decay_iters=D --warmup_iters=W [--lr_replans=...] --time_budget=0".
std::string replay_flags(const TrainConfig& c, int iters);

}  // namespace hg
