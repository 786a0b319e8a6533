// profile.h — where a training step's time goes, by kind of work (for build/bench).
//
// The model calls profile_tick(kind) after each layer: the time since the previous tick is
// charged to that kind, in the forward or the backward column. With no Profile attached the
// tick is one pointer test, so the training step pays nothing for it.
#pragma once
#include <array>
#include <chrono>

namespace hg {

enum class Work { Matmul, Attention, LayerNorm, Gelu, CrossEntropy, Embedding, Residual, Dropout, AdamW, Other, Count };

inline const char* work_name(Work w) {
    constexpr const char* names[] = {"matmul (sgemm)", "attention", "LayerNorm", "GELU", "softmax + cross-entropy",
                                     "embedding", "residual", "dropout", "AdamW + clip", "other (zeroing, copies)"};
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

}  // namespace hg
