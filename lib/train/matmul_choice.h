// matmul_choice.h — `--matmul=auto|openblas|onednn|highway`: which backend runs the products
// (lib/kernels/matmul.h), and for auto, why.
//
// auto measures, never guesses: it records the products one step of the run's own model makes
// (every call with its form, sizes, strides and beta, and how often), times each distinct call
// with each backend on this machine and these threads (the backends taking turns, run by run),
// and takes the backend whose calls add up to less time. Recording a step of a deep model
// would cost the step itself, so the step is recorded on models of their own with one block
// and with two, and each call's count carried to n_layer blocks (every block makes the same
// calls, so this is exact). The timing runs each distinct call a few times, not the whole
// step: under a second for the course model, a few seconds for GPT-2 small. The answer is remembered per machine and shapes when it is clear or
// was long to measure (startup_cache.h says which answers are kept and why; the baby GPT's 39
// products take ~20 s to time), so the next such run starts at once; a close, quick call is
// measured again by the next run.
//
// Under --dtype=bfloat16 the linear layers' products run on oneDNN's bf16 matmul
// (lib/kernels/matmul_bf16.h) whichever backend is chosen, so the recording holds only the
// float products left (attention's, Muon's, ...) and the choice is made on those; where the CPU
// has no bf16 dot products, the widened products are float ones and are recorded with the rest.
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
#include "lib/model/config.h"
#include "lib/process/dist.h"
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

// The products `work` makes when run once, each distinct call with its count.
std::vector<MatmulCall> record_matmuls(const std::function<void()>& work);

// The time in ms `calls` take with each of `backends` on `threads` threads: each distinct call
// timed (the best of a few runs after a first, the backends taking turns run by run), times its
// count; calls recorded inside a parallel region are timed that way, one per thread side by
// side, so they count 1/threads each.
std::vector<double> time_matmul_calls(const std::vector<MatmulCall>& calls, const std::vector<MatmulBackend>& backends,
                                      int threads);

// The calls of one training micro-step of `config` with `train`'s batch and batch threads,
// recorded on models of one and two blocks and carried to config.n_layer.
std::vector<MatmulCall> training_step_matmuls(const GPTConfig& config, const TrainConfig& train,
                                              const TokenView& ids);
// The calls of one forward pass of B rows of T tokens (no targets), recorded the same way.
std::vector<MatmulCall> forward_matmuls(const GPTConfig& config, int B, int T);

// The backend a checkpoint's train_config JSON records under "matmul" (train writes it beside
// the TrainConfig), when it is one this build has; nullopt otherwise (an older checkpoint, one
// from elsewhere: the record is informational, so nothing in it is an error).
std::optional<MatmulBackend> recorded_matmul(const std::string& train_config);

// `flag` given: that backend. auto: `resumed` (what a resumed run's checkpoint records, so that
// it goes on as the run it resumes), else the remembered answer for `key` on this machine, else the
// faster backend on `calls()` (means over the ranks of `dist`, so that every rank picks the
// same), remembered. The choice is not applied: matmul_use(choice.backend) does that.
MatmulChoice choose_matmul(const std::string& flag, const std::string& key,
                           const std::function<std::vector<MatmulCall>()>& calls, int threads,
                           const Dist& dist = {}, std::optional<MatmulBackend> resumed = std::nullopt);
// The cache key of a training run's products and of a forward pass's.
std::string training_matmul_key(const GPTConfig& config, const TrainConfig& train, int threads);
std::string forward_matmul_key(const GPTConfig& config, int B, int T, int threads);

}  // namespace hg
