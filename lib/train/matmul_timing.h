// matmul_timing.h — how a product's time is measured with each matmul backend for the start-up
// choices (matmul_choice.h): each call cut short, timed with the backends taking turns, the
// distinct calls largest first, and the times added up per set of calls.
#pragma once
#include <functional>
#include <vector>

#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"

namespace hg {

// Puts back, when it goes out of scope, the setting in use when it was made (current() reads
// it, use() sets it): whatever switches backends or ways to time them leaves the process as it
// found it, an exception included.
template <typename Setting, Setting (*current)(), void (*use)(Setting)>
class SettingRestorer {
public:
    SettingRestorer() = default;
    SettingRestorer(const SettingRestorer&) = delete;
    SettingRestorer& operator=(const SettingRestorer&) = delete;
    ~SettingRestorer() { use(before_); }

private:
    Setting before_ = current();
};
using MatmulBackendRestorer = SettingRestorer<MatmulBackend, matmul_current, matmul_use>;
using Bf16BackendRestorer = SettingRestorer<Bf16Backend, matmul_bf16_backend, matmul_bf16_use>;

// The time of `run` with each of `backends` in use: run() makes one run and returns its
// seconds; the best of a few runs after a first, the backends taking turns run by run, so a
// machine whose speed drifts while it measures (a VM's does, by tens of percent within
// minutes) slows them alike. The backend in use before is in use again afterwards, however
// this ends.
std::vector<double> time_with_backends(const std::vector<MatmulBackend>& backends, const std::function<double()>& run);

// `m` cut short for timing: M and N down to shortened_size(m, threads), K down to
// kShortenedTerms, its operands tight (each leading dimension the width of its own operand),
// and *scale the factor its time is multiplied by (the ratio of the multiply-adds). Inside our
// parallel regions (one thread) the size is 512; outside them 512·⌈√threads⌉, so that the
// output still has about 512 × 512 numbers a thread to split over the threads as the whole
// call's does.
constexpr int kShortenedTerms = 512;
int shortened_size(const MatmulCall& m, int threads);
MatmulCall shortened_call(const MatmulCall& m, int threads, double* scale);

// The time in ms `calls` take with each of `backends` on `threads` threads: each distinct
// shortened call timed once, its time scaled back up and multiplied by the count of every call
// it stands for; a call recorded inside a parallel region of n threads is timed that way, n
// copies side by side, so each counts 1/n.
std::vector<double> time_matmul_calls(const std::vector<MatmulCall>& calls, const std::vector<MatmulBackend>& backends,
                                      int threads);
// The same for each of several sets of calls (ms[set][backend]), a call that is in more than one
// set timed once.
std::vector<std::vector<double>> time_matmul_call_sets(const std::vector<std::vector<MatmulCall>>& sets,
                                                       const std::vector<MatmulBackend>& backends, int threads);

// How time_matmul_call_sets adds its timings up, apart from the timing itself. Distinct call i
// runs uses[i][k] times in set k of `sets` and stands for work[i] multiply-adds in all; time(i, live)
// returns one run's seconds of call i with each backend index in `live` (entries of the others
// are ignored). The calls are timed in order of their work, largest first (the first of
// equals first). Once the calls timed stand for kTimedBeforeDropping of all the work, a backend
// whose time so far is more than kFarBehind times the fastest backend's on every set that has
// calls, each set with some of its calls timed, is timed no further: on each call left it
// counts the fastest live backend's time multiplied by its ratio so far (its time over the
// fastest's, every set together). Far behind on the largest calls, it would have to win the
// rest by more than that to be taken. Returns ms[set][backend].
constexpr double kTimedBeforeDropping = 0.25, kFarBehind = 2.0;
std::vector<std::vector<double>> add_up_call_times(
    size_t sets, const std::vector<std::vector<double>>& uses, const std::vector<double>& work, size_t backends,
    const std::function<std::vector<double>(size_t, const std::vector<size_t>&)>& time);

}  // namespace hg
