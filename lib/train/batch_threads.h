// batch_threads.h — how a process's threads share a step (trainer.h): all of them on every
// layer of one model (batch_threads = 1), or R batch threads with a replica each, on B/R rows
// apiece. Which is faster depends on the model, the batch and the machine (and how busy it
// is): replicas skip the fork/join of every layer and run each sgemm at its single-thread speed;
// one shared model keeps a single gradient arena (less memory) and lets OpenBLAS split big
// sgemms. So `--batch_threads=auto` (train's default) times a few steps of each and takes the
// faster: under a second for the course model on an idle machine; a setting whose step takes
// over 2 s is timed on one step. A model of more than two blocks is timed as models of one and
// of two blocks, the step of n_layer carried from their difference (each block adds the same
// work), so a deep model's start-up times small models. The answer is remembered per machine,
// shapes and matmul backend when it is clear or was long to measure (startup_cache.h): the next
// such run starts at once; a close, quick call is measured again by the next run.
//
// Both settings compute the same step (to float rounding: the sums over rows split
// differently), and a run with batch_threads = auto is, bit for bit, the run with the setting
// it chose: the timing runs on a model of its own, discarded afterwards, so the run's weights,
// sampler and iteration are never touched.
#pragma once
#include <string>
#include <vector>

#include "lib/checkpoint/checkpoint.h"
#include "lib/data/token_view.h"
#include "lib/model/gpt.h"
#include "lib/process/dist.h"
#include "lib/train/train_config.h"

namespace hg {

// --batch_threads: "auto" (0 here) or a positive integer; hg::Error naming anything else.
// (Whether it divides batch_size is TrainConfig::validate's.)
int parse_batch_threads(const std::string& s);

// The replica setting auto considers: the most batch threads, up to `threads`, that divide
// batch_size (1: there is none above 1).
int replica_candidate(int batch_size, int threads);

struct BatchThreadsChoice {
    int batch_threads = 1;
    int candidate = 1;          // replica_candidate, the setting timed against 1
    double ms_replicas = 0;     // median step with `candidate` replicas (0: not timed)
    double ms_shared = 0;       // median step with all threads on one model (0: not timed)
    double seconds = 0;         // what the timing took
    std::string why;            // for the run's header line
};

// batch_threads = auto for a run of `config` with `train` (its batch_threads is ignored) on
// `threads` threads: 1 when no setting above 1 divides batch_size within `threads`; otherwise the
// faster of replica_candidate and 1, each timed over a few steps (one untimed first, K = 1) on
// a model of its own drawing batches from `ids`. A resumed run (`resumed`: its checkpoint) keeps
// the batch_threads its train_config records, when that still divides batch_size within
// `threads`, so that it goes on as the run it resumes. Under MPI every rank calls this and gets
// the same answer (the step times are averaged over the ranks).
BatchThreadsChoice choose_batch_threads(const GPTConfig& config, const TrainConfig& train, int threads,
                                        const TokenView& ids, const Dist& dist,
                                        const Checkpoint* resumed = nullptr);

}  // namespace hg
