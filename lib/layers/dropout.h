// dropout.h — inverted dropout: out_i = inp_i · keep_i / (1 - p), keep_i ~ Bernoulli(1 - p).
//
// The mask is not stored: keep_i = hash_uniform(key, i) >= p (lib/core/rng.h) is a pure function
// of (key, i), so the backward recomputes it, and threads may split the work any way.
// Every mask is fresh: the trainer derives a key for each (step, micro-step, part of the batch),
// and the model mixes in the (layer, site) (dropout_at, lib/model/gpt_choices.h).
// p = 0 (or evaluation) makes both passes the identity.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/errors.h"
#include "lib/kernels/dropout_kernels.h"  // Dropout

namespace hg {

// out and inp may alias (in place). n == 0, or p outside [0, 1), is hg::Error.
void dropout_forward(float* out, const float* inp, size_t n, Dropout drop);
// dinp = dout · keep / (1 - p)      (dinp may alias dout)
void dropout_backward(float* dinp, const float* dout, size_t n, Dropout drop);

template <typename real>
void dropout_forward_twin(real* out, const real* inp, size_t n, Dropout drop);
template <typename real>
void dropout_backward_twin(real* dinp, const real* dout, size_t n, Dropout drop);

// ---------------------------------------------------------------------------------------------
// Scalar twins.

inline void dropout_check(const char* fn, size_t n, Dropout drop) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
    check(drop.p >= 0.0f && drop.p < 1.0f, "{}: p ({}) must be in [0, 1)", fn, drop.p);  // NaN fails
}

// Element i of the dropped array x: x scaled by m_i = 1/(1-p) where kept, 0 where dropped
// (Dropout::apply in float; here in `real`).
template <typename real>
real dropout_apply(const Dropout& drop, real x, size_t i) {
    return drop.keep(i) ? x * (real(1) / (real(1) - real(drop.p))) : real(0);
}

template <typename real>
void dropout_forward_twin(real* out,        // (n)
                          const real* inp,  // (n)
                          size_t n, Dropout drop) {
    dropout_check("dropout_forward", n, drop);
    for (size_t i = 0; i < n; i++) out[i] = dropout_apply(drop, inp[i], i);
}

// Dropout backward.  out_i = inp_i · m_i with m_i = keep_i / (1 - p) a constant (the mask is a
// function of (key, i) only, not of inp), so ∂out_i/∂inp_i = m_i and
//   dinp_i = dout_i · m_i
// with the same mask (recomputed from the same key) and the same scale 1/(1 - p) as the forward:
// dropped elements get no gradient, kept ones get it scaled up like their values were.
template <typename real>
void dropout_backward_twin(real* dinp,        // (n)
                           const real* dout,  // (n)
                           size_t n, Dropout drop) {
    dropout_check("dropout_backward", n, drop);
    for (size_t i = 0; i < n; i++) dinp[i] = dropout_apply(drop, dout[i], i);
}

}  // namespace hg
