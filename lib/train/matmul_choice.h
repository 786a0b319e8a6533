// matmul_choice.h — `--matmul=auto|openblas|onednn|highway`: which backend runs the products
// (lib/kernels/matmul.h), and for auto, how it is measured.
//
// auto measures: it records the products the run's own model makes (every call with its form,
// sizes, strides and beta, and how often), times each distinct call with each backend on this
// machine and these threads, and takes the backend whose calls add up to less time. Five
// things keep this to seconds on any model, however large its batch or context
// (docs/performance.md has the times):
//   - the recording runs the model's work without computing its products, on models of their
//     own with one block and with two, each call's count carried to n_layer blocks (every block
//     makes the same calls, so this is exact);
//   - those models run a few sequences a replica, not the run's batch (training_step_work):
//     the calls are recorded at b and 2b sequences, which shows which of their sizes and counts
//     grow with the batch, and grown to the run's; what they touch of memory stays small;
//   - a long call is timed cut short (matmul_timing.h), its rows and columns to about 512 per
//     √thread and its terms to 512, on tight operands, and its time scaled back up: past a few
//     hundred rows, columns or terms the backends' blocks repeat, and each costs about what the
//     last did;
//   - each distinct call so cut is timed once per backend, not once per use: calls that differ
//     only past the cut, or in their strides, share one timing;
//   - the calls are timed largest first, and a backend far behind on the first quarter of the
//     work is timed no further (add_up_call_times): a library running a generic kernel on
//     the CPU at hand would otherwise take about half of the products' timing.
// The choice itself goes through startup_choice.h (remembered, the same on every rank). A
// training run chooses its backend and its batch threads together (batch_threads.h); the apps
// that only run forward passes choose the backend alone (choose_matmul).
//
// Under --dtype=bfloat16 the products with bf16 inputs (lib/kernels/matmul_bf16.h) are
// recorded as bf16 calls beside the float ones, and timed the way in use: on oneDNN's bf16
// primitive (the same time whatever the float backend), or widened to float and run on the
// backend being timed.
//
// What the run computes does not depend on how the choice was made: the choice is one
// backend for the whole run, and a run repeats itself bit for bit with the backend it names.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/token_view.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/model/config.h"
#include "lib/process/dist.h"
#include "lib/train/matmul_timing.h"
#include "lib/train/train_config.h"

namespace hg {

// --matmul: "auto" (nullopt) or a backend's name; hg::Error for anything else, or for oneDNN
// in a build without it.
std::optional<MatmulBackend> parse_matmul_flag(const std::string& s);

struct MatmulChoice {
    MatmulBackend backend = MatmulBackend::OpenBLAS;
    std::vector<double> ms;  // auto: the products of one step in ms, per matmul_backends() entry
    double seconds = 0;      // what recording and timing took (0: given, or remembered)
    std::string why;         // for the run's header line
};

// The products `work` makes when run once, each distinct call with its count; with compute =
// false they are not computed (matmul_record).
std::vector<MatmulCall> record_matmuls(const std::function<void()>& work, bool compute = true);

// What one piece of work (a training step, a forward pass) makes: its products, and the ms
// everything else in it took (the products recorded, not computed), both carried to the
// model's depth from models of one and two blocks.
struct ModelWork {
    std::vector<MatmulCall> calls;
    double other_ms = 0;
};
// Which of a step's calls grow with the sequences a replica runs: a one-block model's calls at
// b and at 2b sequences a replica. Each replica makes the calls one model makes, so what one
// batch threads setting recorded serves every other at the same b.
struct BatchGrowth {
    int b = 0;  // 0: nothing recorded yet
    std::vector<MatmulCall> at_b, at_2b;
};
// One training micro-step of `config` with `train`'s batch and batch threads: the products of
// a whole step (the optimizer's too), and the time of its forward and backward, the replicas'
// gradients summed (Trainer::accumulate_gradient). The time is taken on b sequences a replica,
// as many as keep the two-block model's activations within 64 MiB, after an untimed pass (the
// first touch of the arenas' pages, oneDNN's first calls), and scaled to the run's sequences:
// the work besides the products is done sequence by sequence. The optimizer's own loops are
// left out: they are the same whatever the batch threads and the backend.
// `growth`, when given: used if it holds recordings at this b, else filled with this call's
// own (so a second setting of batch threads builds one model fewer). `timed_sequences` > 0
// sets b (for tests).
ModelWork training_step_work(const GPTConfig& config, const TrainConfig& train, const TokenView& ids,
                             int timed_sequences = 0, BatchGrowth* growth = nullptr);
// The step of training_step_work: `calls`, recorded at b sequences a replica, at `sequences` a
// replica. Every size and count of a call that doubled between `at_b` and `at_2b` (the same
// model's calls at b and at 2b sequences) grows in proportion. A call of `calls` is looked up
// in `at_b` as it is, else by everything but its team (the calls of replicas side by side are
// one model's calls, run as a team). Nothing when the two recordings do not pair up one to one
// that way (two calls that coincide at one batch and not at the other), or when a call of
// `calls` is not among them once.
std::optional<std::vector<MatmulCall>> calls_at_batch(std::vector<MatmulCall> calls,
                                                      const std::vector<MatmulCall>& at_b,
                                                      const std::vector<MatmulCall>& at_2b, int b, int sequences);
std::vector<MatmulCall> training_step_matmuls(const GPTConfig& config, const TrainConfig& train,
                                              const TokenView& ids);
// The calls of one forward pass of B rows of T tokens (no targets), recorded the same way.
std::vector<MatmulCall> forward_matmuls(const GPTConfig& config, int B, int T);

// True when every option took the same time: a step with no float products (under bf16), where
// the backend does not matter and the first is taken.
bool no_float_products(const std::vector<double>& ms);

// The backend a checkpoint's train_config JSON records under "matmul" (train writes it beside
// the TrainConfig), when it is one this build has; nullopt otherwise (an older checkpoint, one
// from elsewhere: the record is informational, so nothing in it is an error).
std::optional<MatmulBackend> recorded_matmul(const std::string& train_config);
// The text a train_config JSON records under `field`; nullopt for anything else.
std::optional<std::string> recorded_text(const std::string& train_config, const std::string& field);

// `flag` given: that backend. auto: `resumed` (what a resumed run's checkpoint records, so that
// it goes on as the run it resumes), else through choose_at_startup (startup_choice.h) with
// the backends as options, each timed on `calls()`. The choice is not applied:
// matmul_use(choice.backend) does that.
MatmulChoice choose_matmul(const std::string& flag, const std::string& key,
                           const std::function<std::vector<MatmulCall>()>& calls, int threads,
                           const Dist& dist = {}, std::optional<MatmulBackend> resumed = std::nullopt);
// The cache keys of a training run's products (with its batch threads given; under bf16, with
// the bf16 products' way in use) and of a forward pass's: what the times depend on. A training
// run choosing its batch threads too uses step_choice_key (batch_threads.h).
std::string training_matmul_key(const GPTConfig& config, const TrainConfig& train, int threads);
std::string forward_matmul_key(const GPTConfig& config, int B, int T, int threads);
// The part of a training run's keys both share: the machine, the threads, the model's shapes,
// the batch, the optimizer and the dtype.
std::string training_key(const GPTConfig& config, const TrainConfig& train, int threads);

}  // namespace hg
