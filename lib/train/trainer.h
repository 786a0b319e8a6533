// trainer.h — one training run's state and its steps: what nanoGPT's train.py does per
// iteration, as functions a test can drive (the loop around them is train_loop.h's).
//
//   accumulate_gradient():  for each of K micro-batches: batch ← sampler, forward, backward
//            with dloss = 1/K (so K micro-batches of B give the gradient of one batch of K·B);
//   step():  accumulate_gradient(); the global gradient norm; lr ← lr_at(iter); AdamW on the
//            gradient clipped by clip_scale's factor (applied inside AdamW's one pass; with
//            --optimizer=muon: Muon for the blocks' matrices, AdamW for the rest, both reading
//            the gradient through that factor); iter += 1.
//
// Across N processes (dist.h, mpirun -np N) each rank takes its own B rows of every
// micro-batch, scales its backward by 1/(N·K), and the ranks sum the gradient arena before
// clipping: the step is the one a single process would take on a batch of N·B·K rows. The
// rows come from one batch stream that every rank follows, rank r taking rows [r·B, (r+1)·B)
// of the N·B a single process would draw (Rng::discard skips the others), so 2 ranks with
// batch B see exactly the sequences of 1 rank with batch 2B. Evaluation is split the same way
// and averaged; only rank 0 writes checkpoints.
//
// Within a process, batch_threads = R > 1 splits the batch the same way over R batch threads,
// each with its own replica of the model (gpt_build's share_params_of: one set of weights, R
// gradient and activation arenas of B/R rows each); the replicas run forward and backward side
// by side, each on one thread with its layers and OpenBLAS single-threaded inside, and each
// scales its backward by 1/(N·R·K); then their gradients are summed into the model's. Batch
// thread s of rank r stands in for rank r·R + s of N·R, so one process with R batch threads
// computes what R ranks of one thread would: the same rows and dropout masks, and for R = 2 the
// same sum, to the bit (for more, MPI may add in another order). For small models this beats
// threading every layer: no fork/join per layer, and every sgemm runs at its single-thread
// speed. Which is faster for a given model and batch, choose_step_setup (batch_threads.h)
// finds out.
//
// Everything random is explicit: batches come from `batch_rng` (saved in the checkpoint),
// dropout masks from a key derived from (seed, iter, micro-step), evaluation batches from a
// generator derived from (seed, iter). So N steps, save, resume, N steps gives bit-identical
// weights to 2N steps in one run (same thread setting).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/core/rng.h"
#include "lib/data/token_view.h"
#include "lib/model/gpt.h"
#include "lib/optim/adamw.h"
#include "lib/optim/schedule.h"
#include "lib/process/dist.h"
#include "lib/train/train_config.h"

namespace hg {

// How a time budget was planned (the plan itself is cfg.max_iters = cfg.schedule.lr_decay_iters).
struct BudgetPlan {
    double step_seconds = 0;  // median time of the timed steps
    int timed_steps = 0;
    double spent = 0;         // seconds the timing itself took (counted against the budget)
};

struct StepResult {
    double loss = 0;       // mean over the micro-batches
    double grad_norm = 0;  // before clipping
    double lr = 0;
};

struct Trainer {
    TrainConfig cfg;
    GPT<float> model;
    Arena<float> m, v;                 // AdamW moments, (P) each; m holds Muon's momentum for its matrices
    std::vector<ParamSpan> spans;      // AdamW's tensors (all, or all but Muon's): offsets, sizes, decay flags
    Muon<float> muon;                  // Muon's matrices and Newton–Schulz scratch (none with AdamW)
    std::string tokenizer = "char";    // "char" | "gpt2" (lib/text/tokenizer.h); set before start
    std::vector<std::string> vocab;    // the char tokenizer's (empty for gpt2)
    TokenView train_ids;               // the splits (views: the vectors or token files must outlive the run)
    TokenView val_ids;
    Arena<int> batch;                  // idx and targets, (B, T) each
    Rng batch_rng;
    TrainProgress progress;
    Dist dist;                         // this rank and the number of ranks; set before start/resume
    double comm_seconds = 0;           // wall time spent summing gradients across ranks
    std::vector<GPT<float>> replicas;  // batch_threads - 1 of them, sharing model's weights
    std::vector<double> thread_loss;   // (batch_threads), the loss of each batch thread's rows
    // A JSON object recorded beside cfg in each checkpoint's train_config (train_config.h):
    // the app's own settings, e.g. the data file.
    std::string run_info = "{}";

    // A fresh run: the model built for (batch_size, block_size) and initialised from seed.
    void start(const GPTConfig& config, const TrainConfig& train, std::vector<std::string> vocab,
               const TokenView& train_ids, const TokenView& val_ids);
    // start's arenas and state with the weights left at zero, for timing steps alone (start-up
    // choices, batch_threads.h): what a step costs does not depend on the numbers, and
    // initialising a large embedding costs seconds.
    void start_uninitialised(const GPTConfig& config, const TrainConfig& train, const TokenView& train_ids,
                             const TokenView& val_ids);
    // A fresh run whose weights come from a checkpoint (nanoGPT's init_from=PATH, fine-tuning):
    // start, then the checkpoint's weights (Checkpoint::read_weights_cropped: `config` may have
    // a shorter block_size and another dropout); its tokenizer and vocabulary; AdamW's moments,
    // the iteration and the batch sampler start afresh, as they do from scratch.
    void start_from(const Checkpoint& ck, const GPTConfig& config, const TrainConfig& train,
                    const TokenView& train_ids, const TokenView& val_ids);
    // A run resumed from a checkpoint (weights, moments, iteration, sampler state). The
    // checkpoint must come from a run with the same number of ranks and the same optimizer
    // (hg::Error otherwise).
    void resume(const Checkpoint& ck, const TrainConfig& train, const TokenView& train_ids,
                const TokenView& val_ids);
    // One step's gradient into model.grads_memory: that of the mean loss over the step's N·B·K
    // rows. Each of K micro-batches is split over N ranks × R batch threads of B/R rows, each
    // backward is scaled by 1/(N·R·K), and the N·R·K gradients are summed. Draws the step's
    // rows from batch_rng and changes nothing else (no weights, no iteration count). Returns
    // the mean loss.
    double accumulate_gradient();
    // One training step: accumulate_gradient, then (if the loss is finite on every rank) clip,
    // the optimizer at lr_at(iter) (Muon's group at muon_lr_at), iter += 1. A non-finite loss returns at once, weights
    // untouched.
    StepResult step();
    // Times a few steps, then puts everything back (weights, moments, sampler, iteration), and
    // plans from their median (apply_budget_plan). The run that follows is then exactly the one
    // --max_iters=N would train, apart from where the clock may stop it: the clock enters only
    // through N (and replan_time_budget's N). The step time is averaged over the ranks, so
    // every rank plans alike. hg::Error when not even one step fits.
    BudgetPlan plan_time_budget();
    // Sets cfg.max_iters = cfg.schedule.lr_decay_iters to the iterations of plan.step_seconds
    // that fit in cfg.time_budget - plan.spent (2 % kept in reserve), and cuts the warmup to fit.
    void apply_budget_plan(const BudgetPlan& plan);
    // Plans again from a step time measured during the run (at the end of the warmup: the first
    // steps of a run are often slower than the rest; then as the machine's speed drifts):
    // cfg.max_iters becomes the iterations done plus those that fit in `seconds_left`, and a
    // Replan appended to cfg.schedule.replans moves the decay's end there without a jump in the
    // lr (schedule.h); the run is then the one those replans replay without a clock. Only at or
    // after the warmup's end (hg::Error otherwise). Returns the new plan's iterations. When to
    // call it is budget.h's.
    int replan_time_budget(double seconds_left, double step_seconds);
    // Mean loss over eval_iters random batches of `ids` (no dropout); the batches depend only
    // on (seed, iter), so evaluating does not disturb training's random stream.
    double estimate_loss(const TokenView& ids);
    // The same, asking `stop` before each batch (on every rank, in step): nothing once it says
    // true, so a stop signal does not wait for a long evaluation to finish.
    std::optional<double> estimate_loss(const TokenView& ids, const std::function<bool()>& stop);
    // Writes the checkpoint on rank 0 (cfg and run_info as its train_config); the other ranks
    // hold the same state and write nothing.
    void save(const std::string& path) const;
    // True when every rank holds bit-identical weights (a hash compared across ranks).
    bool ranks_agree() const;

    // Muon's lr at the step that lr_at gives `lr` for: the same schedule, scaled to cfg.muon.lr.
    double muon_lr_at(double lr) const;
    // The replica batch thread s runs: `model` itself for s = 0, replicas[s - 1] after.
    GPT<float>& replica(int s) { return s == 0 ? model : replicas[s - 1]; }
    // Floats in the arenas: the weights, the two moments, Muon's scratch and every replica's gradients; and every
    // replica's activations and backward scratch.
    size_t state_floats() const;
    size_t activation_floats() const;

private:
    void allocate(const GPTConfig& config);
};

}  // namespace hg
