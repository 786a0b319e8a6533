// train_loop.h — a training run from its first iteration to its last, as nanoGPT's train.py
// runs it. Before each step, in this order:
//   - a time-budgeted run may plan again, and the clock may stop it (budget.h);
//   - every eval_interval iterations, and at the last: the train and val losses
//     (Trainer::estimate_loss), and a checkpoint when the val loss is the best so far, or always
//     with always_save_checkpoint, or at the last iteration; never at the iteration the run
//     started from (that checkpoint exists already);
//   - an interrupt (a stop signal: stop_signal.h) saves a checkpoint and ends the run; one
//     that arrives during an evaluation cuts it short (asked before each of its batches);
// then the step, and a log line every log_interval iterations and at the planned last one. A
// non-finite loss ends the run with an hg::Error and saves nothing: the last good checkpoint
// stays as it was. Evaluating and saving do not count against a time budget.
//
// apps/train.cpp parses the flags, calls run_training, and prints what it reports through a
// RunObserver; a test drives the same loop with a clock and an interrupt of its own.
#pragma once
#include <functional>
#include <string>

#include "lib/train/budget.h"
#include "lib/train/trainer.h"

namespace hg {

// Seconds on a steady clock (any origin): the default clock of a run.
double steady_seconds();

struct RunSettings {
    std::string ckpt_path;               // where checkpoints go (rank 0 writes them)
    bool always_save_checkpoint = true;  // save at every evaluation, not only on a new best val loss
    std::function<double()> clock = steady_seconds;  // wall-clock seconds
    std::function<bool()>
        interrupted;  // asked before each step and each evaluation batch (on every rank); empty: never
};

// What a run reports as it goes, for whoever prints it; each call comes after the fact.
struct RunObserver {
    virtual ~RunObserver() = default;
    virtual void replanned(const Replanned&) {}
    virtual void evaluated(int iter, double train_loss, double val_loss) {}
    virtual void saved(int iter) {}        // a checkpoint at an evaluation
    virtual void interrupted(int iter) {}  // saved, and the run ends
    // Step `iter` (0-based) done; ms_per_iter is the mean over the steps since the last log line
    // (evaluation excluded).
    virtual void logged(int iter, const StepResult& r, double ms_per_iter) {}
};

struct RunResult {
    int first_iter = 0;          // the iteration the run started from
    bool clock_stopped = false;  // the time budget ran out before cfg.max_iters
    bool interrupted = false;
    double train_seconds = 0;    // training, a time budget's planning included
    double eval_seconds = 0;     // evaluating and saving
    double wall_seconds = 0;     // all of it, the planning included
};

// Runs `trainer` (started or resumed; planned with `plan` when it has a time budget) to its
// end. hg::Error on a non-finite loss, or when the ranks' weights differ at an evaluation.
RunResult run_training(Trainer& trainer, const BudgetPlan& plan, const RunSettings& settings,
                       RunObserver& observer);

}  // namespace hg
