// dropout_kernels.h — dropout's mask and multiply in one pass (dynamic dispatch; see simd.h).
// lib/layers/dropout.cpp runs it in both passes (the forward on the input, the backward on the
// gradient: dinp_i = dout_i · m_i with the same m_i), and attention runs it on the probabilities
// and on their gradient. Scalar twin: Dropout::apply below, which the tests compare it with on
// every target; the layer's own twins are in lib/layers/dropout.h.
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
    // Element i of a dropped array: x scaled by 1/(1-p) where kept, 0 (+0) where dropped.
    float apply(float x, size_t i) const { return keep(i) ? x * scale() : 0.0f; }
};

// out_j = drop.apply(inp_j, i0 + j) for j < n (out may alias inp), the mask bit for bit
// Dropout::keep's: the hash runs in 64-bit lanes, the same integer steps as mix64, and its 24
// bits are compared with ⌈p·2²⁴⌉, the same test as hash_uniform's ≥ p (dropout-inl.h).
void dropout_apply_kernel(float* out, const float* inp, size_t n, const Dropout& drop, size_t i0);
// The same mask on two arrays at once, hashed once: out = dropout(inp), out2 = dropout(inp2)
// (attention's backward forms P from att and dA from dP, element for element).
void dropout_apply2_kernel(float* out, const float* inp, float* out2, const float* inp2, size_t n,
                           const Dropout& drop, size_t i0);

}  // namespace hg
