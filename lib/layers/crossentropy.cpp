// crossentropy.cpp — fused softmax + cross-entropy, rows in parallel (see crossentropy.h; the
// derivation of the backward sits above crossentropy_backward_twin there).
#include "lib/layers/crossentropy.h"

#include <cstring>

#include "lib/core/parallel.h"
#include "lib/kernels/softmax_kernels.h"

namespace hg {

// Rows are split across threads only above 2^18 logits: below, a row is too little work to hand
// out (docs/performance.md).
constexpr size_t kParallelMinLogits = size_t(1) << 18;

// probs (N,V), losses (N), logits (N,V), targets (N). Returns the mean over targets != -1.
double crossentropy_forward(float* probs, float* losses, const float* logits,
                            const int* targets, int N, int V) {
    // Every target is checked before any work, so a bad one throws from this thread
    // (an exception must not leave an OpenMP region).
    const int count = crossentropy_count_targets(targets, N, V);
    for_pieces(N, 1, V, [&](size_t n, size_t) {  // one row per piece
        losses[n] = crossentropy_row(probs + n * V, logits + n * V, (size_t)V, targets[n]);
    }, kParallelMinLogits);
    // The mean, summed in double and in row order after the parallel part: the same bits
    // whatever the thread count.
    double total = 0;
    for (int n = 0; n < N; n++) total += losses[n];
    return count > 0 ? total / count : 0.0;
}

// dlogits (N,V) = dloss/K · (probs - onehot(targets)), 0 on rows with target -1.
// Derivation above crossentropy_backward_twin in crossentropy.h.
void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V,
                           float dloss) {
    const int count = crossentropy_count_targets(targets, N, V);
    const float scale = count > 0 ? dloss / float(count) : 0.0f;  // dloss/K
    for_pieces(N, 1, V, [&](size_t n, size_t) {  // one row per piece
        const int y = targets[n];
        const float* probs_n = probs + n * V;
        float* dlogits_n = dlogits + n * V;
        if (y == -1) {  // ignored row: no gradient
            std::memset(dlogits_n, 0, sizeof(float) * (size_t)V);
            return;
        }
        for (int i = 0; i < V; i++) dlogits_n[i] = scale * probs_n[i];  // p_i (auto-vectorised)
        dlogits_n[y] -= scale;                                          // -onehot
    }, kParallelMinLogits);
}

}  // namespace hg
