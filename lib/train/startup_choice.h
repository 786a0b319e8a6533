// startup_choice.h — how a run chooses among settings that compute the same thing at different
// speeds (which matmul backend, how many batch threads, which way the bf16 products take), once,
// at start-up.
//
// One procedure for every such choice:
//   1. the options, in a fixed order: what the flags and a resumed checkpoint leave open (a
//      setting given by a flag, or recorded by the checkpoint a run resumes, is the only option);
//   2. under MPI, the ranks must see the same options (threads or free memory may differ from
//      host to host); if they do not, every rank takes the first, untimed;
//   3. one option: taken, nothing timed;
//   4. an answer remembered for this key on this machine (startup_cache.h), by every rank the
//      same one: taken as it was recorded. The times beside it are for the message only, so a
//      tie in them can never turn into another answer: a second run, a resumed run and a replay
//      make the choice the first run made;
//   5. otherwise each option is timed (the caller's measure()), the times averaged over the
//      ranks, the fastest taken (the first of equals), and the answer remembered.
// Every answer is remembered, close ones too: the second run on a machine must start at once.
// A remembered answer goes only when what it depends on changes (the key: the CPU, the
// libraries, the threads, the shapes), or when the cache file is deleted.
//
// What a run computes never depends on how it chose: the choice is made before the run's own
// model exists, on models and buffers of its own, and names a setting the run then uses from
// its first step, exactly as if it had been given by a flag.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/profile.h"
#include "lib/process/dist.h"

namespace hg {

// A value measured on models of one and of two blocks, carried to `n_layer` blocks: every block
// adds the same, what the second block added (for a count of calls, or a time).
double carry_to_depth(double one_block, double two_blocks, int n_layer);

enum class ChosenBy {
    Only,        // one option: nothing to choose
    RanksDiffer, // the ranks' options differ: the first, untimed
    Remembered,  // from the cache, as recorded
    Measured,    // timed now (and remembered)
};

struct StartupChoice {
    size_t taken = 0;        // an index into the options
    std::vector<double> ms;  // each option's time, lower is faster (empty: only one option)
    double seconds = 0;      // what measuring took (0 unless measured)
    ChosenBy by = ChosenBy::Only;
    // "remembered from an earlier run on this machine (PATH)", "timed in 0.8 s", ...
    std::string source() const;
    // The taken option's time against the others', each option named by labels[i]: "6.1 ms with
    // onednn against 12 ms with openblas".
    std::string compared(const std::vector<std::string>& labels) const;
};

// Steps 2–5 above for `options` (names without spaces, in a fixed order): `key` names what the
// times depend on (the option names are added to it); measure() times every option, one ms
// each, and is called on every rank or on none.
StartupChoice choose_at_startup(const std::vector<std::string>& options, const std::string& key,
                                const std::function<std::vector<double>()>& measure, const Dist& dist = {});

}  // namespace hg
