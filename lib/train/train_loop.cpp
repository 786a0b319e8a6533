// train_loop.cpp — see train_loop.h.
#include "lib/train/train_loop.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "lib/core/errors.h"

namespace hg {

double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RunResult run_training(Trainer& trainer, const BudgetPlan& plan, const RunSettings& settings,
                       RunObserver& observer) {
    const std::function<double()>& now = settings.clock;
    const TrainConfig& c = trainer.cfg;  // the budget's re-plans change max_iters as the run goes
    RunResult result;
    result.first_iter = trainer.progress.iter_num;
    double t_last = now();  // the last log line, or the end of the last evaluation
    const double t_start = t_last;
    int iters_since_log = 0;
    TimeBudget budget(trainer, plan, [&] { return plan.spent + now() - t_start - result.eval_seconds; });
    // Asked on every rank at the same points, so every rank stops at the same one.
    auto interrupted = [&] { return dist_any(trainer.dist, settings.interrupted && settings.interrupted()); };
    auto stop_here = [&](int iter) {
        trainer.save(settings.ckpt_path);
        observer.interrupted(iter);
        result.interrupted = true;
    };
    while (true) {
        const int iter = trainer.progress.iter_num;
        if (const auto replanned = budget.replan_if_due()) observer.replanned(*replanned);
        result.clock_stopped = budget.clock_stops();
        const bool last = iter >= c.max_iters || result.clock_stopped;
        if (iter % c.eval_interval == 0 || last) {
            const double t0 = now();
            const std::optional<double> train = trainer.estimate_loss(trainer.train_ids, interrupted);
            const std::optional<double> val =
                train ? trainer.estimate_loss(trainer.val_ids, interrupted) : std::nullopt;
            if (!val) {  // interrupted mid-evaluation: save without it
                result.eval_seconds += now() - t0;
                stop_here(iter);
                break;
            }
            const double train_loss = *train, val_loss = *val;
            check(trainer.ranks_agree(),
                  "the ranks' weights differ at iter {}: the MPI sum is not identical on every rank", iter);
            observer.evaluated(iter, train_loss, val_loss);
            const bool best = val_loss < trainer.progress.best_val_loss;
            if (best) trainer.progress.best_val_loss = val_loss;
            if (iter > result.first_iter && (best || settings.always_save_checkpoint || last)) {
                trainer.save(settings.ckpt_path);
                observer.saved(iter);
            }
            t_last = now();
            result.eval_seconds += t_last - t0;
        }
        if (last) break;
        if (interrupted()) {
            stop_here(iter);
            break;
        }
        const StepResult r = trainer.step();
        check(std::isfinite(r.loss), "loss is {} at iter {}: stopping; the last good checkpoint ({}) is untouched",
              r.loss, iter, settings.ckpt_path);
        iters_since_log++;
        if ((iter + 1) % c.log_interval == 0 || iter + 1 == c.max_iters) {
            const double t = now();
            observer.logged(iter, r, 1000 * (t - t_last) / iters_since_log);
            t_last = t;
            iters_since_log = 0;
        }
    }
    result.train_seconds = budget.train_seconds();
    result.wall_seconds = now() - t_start + plan.spent;
    return result;
}

}  // namespace hg
