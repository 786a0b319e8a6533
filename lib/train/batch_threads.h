// batch_threads.h — how a process's threads share a step (trainer.h), which backend runs its
// products, and under bf16 which way its bf16 products take: the start-up choices of a training
// run, made together.
//
// batch_threads = 1 puts all threads on every layer of one model; R > 1 gives R batch threads a
// replica each, on B/R rows apiece. Which is faster depends on the model, the batch and the
// machine: replicas skip the fork/join of every layer and run each product at its
// single-thread speed, but each holds a gradient arena that every step zeroes and sums into the
// model's; one shared model splits the big products over all threads. And how fast a backend
// runs the products depends on the layout: B/R rows on one thread, or B rows on all. So the two
// are chosen together (the ordering question has no answer otherwise: a backend timed for one
// layout may lose on the other): the options are every pair of a backend and an R, where R
// runs over the divisors of batch_size up to the threads whose arenas fit in memory; each
// pair's step is estimated as
//
//     the products' time with that backend at that R (matmul_choice.h: recorded, timed short)
//   + the time of the rest of the forward and backward at that R, the replicas' gradients
//     summed (the same with its products not computed)
//
// (the optimizer's own loops, the same for every pair, are left out of the estimate)
// and the fastest pair is taken. Both parts are measured on models of one and two blocks
// running a few sequences a replica, carried to n_layer and to the run's batch
// (training_step_work), so a deep model's start-up runs small models (docs/performance.md says
// what it costs). The answer is remembered (startup_choice.h), so the next run with the same
// shapes times nothing. Under --dtype=bfloat16 the bf16 products' way (matmul_bf16.h: oneDNN's
// bf16 primitive, or widened to float and run on the backend) is a third part of each option:
// every way with every pair, the products timed that way. A flag that gives the backend, R or
// the way, or a resumed checkpoint that records them, leaves only the others to choose, or
// nothing.
//
// Every setting computes the same step (to float rounding: the sums over rows split
// differently, and each backend tiles its sums its own way), and a run with auto is, bit for
// bit, the run with the settings it chose given as flags: the timing runs on models of its own,
// discarded before the run's model is built, so the run's weights, sampler and iteration are
// never touched.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/data/token_view.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/model/config.h"
#include "lib/process/dist.h"
#include "lib/train/startup_choice.h"
#include "lib/train/train_config.h"

namespace hg {

// --batch_threads: "auto" (0 here) or a positive integer; hg::Error naming anything else.
// (Whether it divides batch_size is TrainConfig::validate's.)
int parse_batch_threads(const std::string& s);

// The batch threads auto considers: every R from 1 to `threads` that divides batch_size and
// for which fits(R) (the arenas of R replicas fit in memory), in increasing order. 1 is always
// among them: the run's memory check refuses a run where even one model does not fit.
std::vector<int> batch_threads_candidates(int batch_size, int threads, const std::function<bool(int)>& fits);

// What the flags and the run leave to choose.
struct StepSetupFlags {
    std::string matmul = "auto";          // --matmul
    std::string matmul_bf16 = "auto";     // --matmul_bf16 (under --dtype=bfloat16)
    int batch_threads = 0;                // --batch_threads (0: auto)
    std::optional<double> memory_bytes;   // what the run can allocate (nothing: unknown, every R fits)
    const Checkpoint* resumed = nullptr;  // a resumed run's checkpoint: it keeps what that records
};

struct StepSetup {
    MatmulBackend backend = MatmulBackend::OpenBLAS;
    int batch_threads = 1;
    Bf16Backend way = Bf16Backend::Widen;  // the bf16 products' (a float run: the one in use, untimed)
    std::string matmul_why, batch_threads_why, way_why;  // for the run's header lines (way_why: bf16 only)
    // The options (every way, R and backend: way outer, backend inner) and how one was taken.
    std::vector<Bf16Backend> ways;
    std::vector<MatmulBackend> backends;
    std::vector<int> Rs;
    StartupChoice choice;
};

// --matmul_bf16: "auto" (nullopt) or a way of matmul_bf16.h; hg::Error for anything else, or
// for onednn where it cannot run.
std::optional<Bf16Backend> parse_matmul_bf16_flag(const std::string& s);
// The way a checkpoint's train_config JSON records under "matmul_bf16" (train writes it beside
// the TrainConfig), when it runs here; nullopt otherwise (informational, so never an error).
std::optional<Bf16Backend> recorded_matmul_bf16(const std::string& train_config);

// The backend and batch threads of a run of `config` with `train` (its batch_threads is
// ignored) on `threads` threads, drawing batches from `ids` for the timing. Under MPI every rank
// calls this and gets the same answer.
StepSetup choose_step_setup(const GPTConfig& config, const TrainConfig& train, int threads, const TokenView& ids,
                            const StepSetupFlags& flags, const Dist& dist = {});

// The cache key of that choice (the options are added to it): the machine, the threads, the
// shapes, the batch, the optimizer, the dtype.
std::string step_choice_key(const GPTConfig& config, const TrainConfig& train, int threads);

}  // namespace hg
