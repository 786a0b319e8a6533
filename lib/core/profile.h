// profile.h — where a training step's time goes, by kind of work (for build/bench).
//
// A Profile is a clock and a table of seconds per kind of work, forward and backward. Each
// tick(kind, backward) charges the time since the previous tick to that kind. The model charges
// each layer call to its kind through Timed (below); the trainer ticks for what it does around
// the passes: drawing the batch and zeroing the gradients, summing the batch threads' and the
// ranks' gradients (Other), clipping and AdamW (AdamW), and, with batch threads, the time the
// profiled thread (replica 0) spends waiting for the others to finish their backward (Wait).
// That wait used to land in Other; it is idle time, not work. Timed charges whatever ran between two
// layer calls to Other as well (copying the inputs, zeroing the residual stream's gradient).
// With no Profile attached, nothing is timed: a pointer test per call.
#pragma once
#include <array>
#include <chrono>

namespace hg {

// Wall-clock seconds since t0: what every timing in the library measures with.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

enum class Work {
    Matmul,
    Attention,
    Norm,
    MlpActivation,
    CrossEntropy,
    Embedding,
    Residual,
    Dropout,
    Optimizer,
    Wait,
    Other,
    Count
};

inline const char* work_name(Work w) {
    constexpr const char* names[] = {"matmul (linear layers)", "attention", "norm (LayerNorm, RMSNorm)",
                                     "MLP activation", "softmax + cross-entropy", "embedding", "residual", "dropout",
                                     "optimizers + clip",
                                     "waiting for batch threads", "other (zeroing, copies, sums)"};
    return names[int(w)];
}

struct Profile {
    static constexpr int kKinds = int(Work::Count);
    std::array<std::array<double, kKinds>, 2> seconds{};  // [forward = 0 / backward = 1][kind]
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();

    void restart() { last = std::chrono::steady_clock::now(); }
    void tick(Work kind, bool backward) {
        auto now = std::chrono::steady_clock::now();
        seconds[backward][int(kind)] += std::chrono::duration<double>(now - last).count();
        last = now;
    }
    void clear() { seconds = {}; }
};

// Charges one layer call to its kind of work, when a Profile is attached: made just before the
// call (the time since the previous tick goes to Other), it charges the call's own time to `kind`
// when it goes out of scope. lib/model/gpt_choices.h opens one in each layer call of the passes:
//   const Timed timed(model.profile, Work::MlpActivation, backward);
//   gelu_forward(...);
struct Timed {
    Timed(Profile* p, Work k, bool b) : profile(p), kind(k), backward(b) {
        if (profile) profile->tick(Work::Other, backward);
    }
    ~Timed() {
        if (profile) profile->tick(kind, backward);
    }
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;

private:
    Profile* profile;
    Work kind;
    bool backward;
};

}  // namespace hg
