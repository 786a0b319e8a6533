// crossentropy.h — softmax + cross-entropy over the vocabulary, fused and stable.
//
//   probs[n,:] = softmax(logits[n,:])            (max subtracted first: log-sum-exp)
//   losses[n]  = -log probs[n, targets[n]]       (0 where targets[n] == -1: ignored)
//   loss       = Σ losses / (number of targets != -1)
// Backward of the mean loss, scaled by dloss (1, or 1/K under gradient accumulation):
//   dlogits[n,:] += dloss / count · (probs[n,:] - onehot(targets[n]))
#pragma once
#include <cstddef>

namespace hg {

// Returns the mean loss (0 when every target is -1). A target outside [-1, V) is hg::Error.
double crossentropy_forward(float* probs, float* losses, const float* logits,
                            const int* targets, int N, int V);
void crossentropy_backward(float* dlogits, const float* probs, const int* targets, int N, int V,
                           float dloss);

template <typename real>
double crossentropy_forward_scalar(real* probs, real* losses, const real* logits,
                                   const int* targets, int N, int V);
template <typename real>
void crossentropy_backward_scalar(real* dlogits, const real* probs, const int* targets, int N,
                                  int V, real dloss);

}  // namespace hg
