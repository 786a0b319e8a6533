// dropout.h — inverted dropout: out_i = inp_i · keep_i / (1 - p), keep_i ~ Bernoulli(1 - p).
//
// The mask is not stored: keep_i = hash_uniform(key, i) >= p (lib/rng.h) is a pure function
// of (key, i), so the backward recomputes it, and threads may split the work any way.
// The trainer derives a fresh key for every (step, micro-step, layer, site).
// p = 0 (or evaluation) makes both passes the identity.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/rng.h"

namespace hg {

struct Dropout {
    float p = 0.0f;    // probability of dropping, in [0, 1)
    uint64_t key = 0;  // which mask
    bool active() const { return p > 0.0f; }
    bool keep(size_t i) const { return hash_uniform(key, i) >= p; }
    float scale() const { return 1.0f / (1.0f - p); }
};

// out and inp may alias (in place).
void dropout_forward(float* out, const float* inp, size_t n, Dropout drop);
// dinp += dout · keep / (1 - p)
void dropout_backward(float* dinp, const float* dout, size_t n, Dropout drop);

template <typename real>
void dropout_forward_scalar(real* out, const real* inp, size_t n, Dropout drop);
template <typename real>
void dropout_backward_scalar(real* dinp, const real* dout, size_t n, Dropout drop);

}  // namespace hg
