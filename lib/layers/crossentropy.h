// crossentropy.h — softmax + cross-entropy over the vocabulary, fused and stable.
//
//   probs[n,:] = softmax(logits[n,:])            (max subtracted first: log-sum-exp)
//   losses[n]  = -log probs[n, targets[n]]       (0 where targets[n] == -1: ignored)
//                computed as log Σ exp(z - max) + (max - z[target]): finite even when the
//                target's probability underflows to 0 in float
//   loss       = Σ losses / (number of targets != -1)
// Backward of the mean loss, scaled by dloss (1 for one batch; the trainer passes 1/K for K
// micro-batches, divided again by the number of data-parallel parts):
//   dlogits[n,:] = dloss / count · (probs[n,:] - onehot(targets[n]))   (0 where ignored)
//
// losses (N), probs (N,V) and logits (N,V) are row-major; targets (N) are class ids or -1.
// probs are stored for the backward (it needs nothing else); dlogits may be probs itself, each row
// read before it is written (the model writes the gradient over the probabilities), and probs may
// be logits itself (a model that keeps no logits, ActivationPlan in config.h).
#pragma once
#include <cstddef>

#include "lib/core/errors.h"
#include "lib/kernels/softmax_kernels.h"

namespace hg {

// Returns the mean loss (0 when every target is -1). A target outside [-1, V) is hg::Error.
double crossentropy_forward(float* probs, float* losses, const float* logits,
                            const int* targets, int N, int V);
void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V,
                           float dloss);

template <typename real>
double crossentropy_forward_twin(real* probs, real* losses, const real* logits,
                                 const int* targets, int N, int V);
template <typename real>
void crossentropy_backward_twin(real* dlogits, const real* probs, const int* targets, int N,
                                int V, real dloss);

// Checks the sizes and every target (hg::Error naming the first bad one) and returns how
// many targets are not -1: the count the mean loss divides by.
inline int crossentropy_count_targets(const int* targets, int N, int V) {
    check(N > 0, "cross-entropy: number of rows N must be positive (N={})", N);
    check(V > 0, "cross-entropy: vocabulary size V must be positive (V={})", V);
    int count = 0;
    for (int n = 0; n < N; n++) {
        const int y = targets[n];
        check(y >= -1 && y < V, "cross-entropy: target {} at row {} is outside [-1, V={})", y, n,
              V);
        count += (y != -1);
    }
    return count;
}

// ---- scalar twins (plain loops, any number type; the gradient checks run them in double) ----

template <typename real>
double crossentropy_forward_twin(real* probs, real* losses, const real* logits,
                                 const int* targets, int N, int V) {
    const int count = crossentropy_count_targets(targets, N, V);
    double total = 0;
    for (int n = 0; n < N; n++) {
        losses[n] = crossentropy_row_scalar(probs + (size_t)n * V, logits + (size_t)n * V,
                                            (size_t)V, targets[n]);
        total += double(losses[n]);
    }
    return count > 0 ? total / count : 0.0;
}

// The derivation (crossentropy_backward in crossentropy.cpp does the same, row-parallel).
//
// Forward, one row n with logits z (V), target y != -1, p = softmax(z):
//   loss_n = -log p_y = -z_y + log Σ_j exp(z_j)
//   L      = dloss · (1/K) Σ_{n : y_n != -1} loss_n,   K = number of targets != -1
// Differentiate loss_n in z_i: the first term gives -1 when i = y; the log-sum-exp gives
//   ∂/∂z_i log Σ_j exp(z_j) = exp(z_i) / Σ_j exp(z_j) = p_i
// so  ∂loss_n/∂z_i = p_i - [i = y]   (probabilities minus the one-hot target),
// and dL/dlogits[n,i] = dloss/K · (p_i - onehot_i). A row with y = -1 is not in the sum:
// its gradient is 0. The softmax's own Jacobian never has to be formed.
template <typename real>
void crossentropy_backward_twin(real* dlogits, const real* probs, const int* targets, int N,
                                int V, real dloss) {
    const int count = crossentropy_count_targets(targets, N, V);
    const real scale = count > 0 ? dloss / real(count) : real(0);  // dloss/K
    for (int n = 0; n < N; n++) {
        const int y = targets[n];
        const real* probs_n = probs + (size_t)n * V;
        real* dlogits_n = dlogits + (size_t)n * V;
        for (int i = 0; i < V; i++)  // the p_i part (an ignored row: 0)
            dlogits_n[i] = y == -1 ? real(0) : scale * probs_n[i];
        if (y != -1) dlogits_n[y] -= scale;  // the -onehot part
    }
}

}  // namespace hg
