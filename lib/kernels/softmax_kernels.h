// softmax_kernels.h — row softmax, its backward, and the cross-entropy row: Highway kernels
// (dynamic dispatch; see simd.h) with their plain-loop scalar twins below.
//
// Attention runs softmax_row on each causal row of scores (length t+1) and
// softmax_backward_row on each row of its backward; cross-entropy runs crossentropy_row on
// each row of logits (length V). All are stable: the row max is subtracted before exp, so no
// input magnitude overflows (exp of a number <= 0 is at most 1).
//
// Vector and twin differ only in rounding: the vector code sums in lanes (a different order)
// and its exponential (exp-inl.h) is within 4 roundings of std::exp, and 0 where std::exp's is
// below float's normal range. Tests allow 1e-6 + 4e-6·|twin| on every output
// (tests/test_softmax_kernels.cpp; the measured worst is under 3% of that).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>

namespace hg {

// out = softmax(inp) over n >= 1 entries:  out_i = exp(x_i - max) / Σ_j exp(x_j - max).
// out may alias inp (attention runs it in place).
void softmax_row(float* out, const float* inp, size_t n);

// probs = softmax(logits) over n >= 1 entries, and returns the loss -log probs[target]
// (0 when target < 0, the "ignore" label). The loss is computed as
//   log Σ_j exp(x_j - max)  +  (max - x_target)
// both terms >= 0, so it stays finite even when probs[target] underflows to 0. probs may
// alias logits (x_target is read before anything is written).
float crossentropy_row(float* probs, const float* logits, size_t n, int target);

// The softmax Jacobian-vector product, for one row: given out = softmax(x) and
// dout = dL/dout, writes (=, not +=: it fills scratch)
//   dinp_i = out_i · (dout_i - Σ_j out_j · dout_j)
// dinp may alias dout.
void softmax_backward_row(float* dinp, const float* out, const float* dout, size_t n);

// ---- scalar twins (same math, plain loops, any number type) ----

template <typename real>
void softmax_row_scalar(real* out, const real* inp, size_t n) {
    real maxval = inp[0];
    for (size_t i = 1; i < n; i++) maxval = std::max(maxval, inp[i]);
    real sum = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = std::exp(inp[i] - maxval);
        sum += out[i];
    }
    real inv = real(1) / sum;  // sum >= 1: the max entry contributes exp(0)
    for (size_t i = 0; i < n; i++) out[i] *= inv;
}

template <typename real>
real crossentropy_row_scalar(real* probs, const real* logits, size_t n, int target) {
    const real x_target = target < 0 ? real(0) : logits[target];
    real maxval = logits[0];
    for (size_t i = 1; i < n; i++) maxval = std::max(maxval, logits[i]);
    real sum = 0;
    for (size_t i = 0; i < n; i++) {
        probs[i] = std::exp(logits[i] - maxval);
        sum += probs[i];
    }
    real inv = real(1) / sum;
    for (size_t i = 0; i < n; i++) probs[i] *= inv;
    if (target < 0) return real(0);
    return std::log(sum) + (maxval - x_target);
}

// Softmax backward, one row (n).  out_i = exp(x_i) / Σ_j exp(x_j), so
//   ∂out_i/∂x_j = out_i · (δ_ij − out_j)                     (the Jacobian, n × n, never formed)
//   dinp_j = Σ_i dout_i · ∂out_i/∂x_j = out_j · (dout_j − Σ_i out_i · dout_i)
// line D is the row's dot product Σ_i out_i·dout_i, line J the Jacobian-vector product.
template <typename real>
void softmax_backward_row_scalar(real* dinp, const real* out, const real* dout, size_t n) {
    real dot = 0;
    for (size_t i = 0; i < n; i++) dot += out[i] * dout[i];          // line D
    for (size_t i = 0; i < n; i++) dinp[i] = out[i] * (dout[i] - dot);  // line J
}

}  // namespace hg
