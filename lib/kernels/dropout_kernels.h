// dropout_kernels.h — the multiply half of dropout (dynamic dispatch; see simd.h).
// lib/layers/dropout.cpp fills `mult` from the hash (scalar: 0 where dropped, 1/(1-p) where
// kept) and calls this, in both passes: the forward multiplies the input, the backward the
// gradient (dinp_i = dout_i · mult_i). Scalar twins: twin::dropout_forward /
// twin::dropout_backward in lib/layers/dropout.h. One IEEE multiply: bit-identical to them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/core/rng.h"

namespace hg {

// Which elements one dropout keeps: keep(i) = hash_uniform(key, i) >= p, a pure function of
// (key, i) (lib/layers/dropout.h says why the mask is recomputed rather than stored).
struct Dropout {
    float p = 0.0f;    // probability of dropping, in [0, 1)
    uint64_t key = 0;  // which mask
    bool active() const { return p > 0.0f; }
    bool keep(size_t i) const { return hash_uniform(key, i) >= p; }
    float scale() const { return 1.0f / (1.0f - p); }
};

// out_i = inp_i · mult_i       (out may alias inp)
void dropout_mul_kernel(float* out, const float* inp, const float* mult, size_t n);

}  // namespace hg
