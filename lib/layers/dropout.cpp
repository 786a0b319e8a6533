// dropout.cpp — the fast float dropout. The mask comes from the hash (scalar: one mix64 per
// element), written as multipliers {0, 1/(1-p)} into a small per-chunk buffer; the multiply is
// a Highway kernel (lib/kernels/dropout_kernels). Chunks are split across threads
// (lib/core/parallel.h); the mask of element i depends only on (key, i), never on which thread
// computes it.
#include "lib/layers/dropout.h"

#include <cstring>

#include "lib/core/parallel.h"
#include "lib/kernels/dropout_kernels.h"

namespace hg {

constexpr size_t kChunk = 4096;  // numbers per piece of work; the multiplier buffer is 16 KiB of stack

// mult[j] = multiplier of element i0 + j: 0 if dropped, 1/(1-p) if kept.
static void fill_multipliers(float* mult, size_t i0, size_t len, const Dropout& drop) {
    const float s = drop.scale();
    for (size_t j = 0; j < len; j++) mult[j] = drop.keep(i0 + j) ? s : 0.0f;
}

// Both passes walk the array in fixed chunks (in parallel when large), recompute each chunk's
// multipliers m_i = keep_i / (1 - p) from the key, and hand them to `apply(i0, len, mult)`.
template <typename Apply>
static void for_each_chunk(size_t n, Dropout drop, Apply apply) {
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) {
        float mult[kChunk];
        fill_multipliers(mult, i0, len, drop);
        apply(i0, len, mult);
    });
}

void dropout_forward(float* out,        // (n)
                     const float* inp,  // (n)
                     size_t n, Dropout drop) {
    dropout_check("dropout_forward", n, drop);
    if (!drop.active()) {  // p = 0: the identity
        if (out != inp) std::memmove(out, inp, n * sizeof(float));
        return;
    }
    for_each_chunk(n, drop, [&](size_t i0, size_t len, const float* mult) {
        dropout_mul_kernel(out + i0, inp + i0, mult, len);
    });
}

// Backward (derivation above twin::dropout_backward in dropout.h): out_i = inp_i · m_i with the
// mask fixed by the key, so dinp_i = dout_i · m_i — the same multipliers, recomputed from the
// same key (fill_multipliers), the same scale 1/(1-p), the same multiply as the forward.
void dropout_backward(float* dinp,        // (n)
                      const float* dout,  // (n)
                      size_t n, Dropout drop) {
    dropout_check("dropout_backward", n, drop);
    if (!drop.active()) {  // p = 0: the gradient passes unchanged
        if (dinp != dout) std::memmove(dinp, dout, n * sizeof(float));
        return;
    }
    for_each_chunk(n, drop, [&](size_t i0, size_t len, const float* mult) {
        dropout_mul_kernel(dinp + i0, dout + i0, mult, len);
    });
}

}  // namespace hg
