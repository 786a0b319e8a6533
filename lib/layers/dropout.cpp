// dropout.cpp — the fast float dropout: the mask's hash and the multiply in one Highway pass
// (lib/kernels/dropout_kernels). Chunks are split across threads (lib/core/parallel.h); the
// mask of element i depends only on (key, i), never on which thread computes it.
#include "lib/layers/dropout.h"

#include <cstring>

#include "lib/core/parallel.h"
#include "lib/kernels/dropout_kernels.h"

namespace hg {

constexpr size_t kChunk = 4096;  // numbers per piece of work

// Both passes walk the array in fixed chunks (in parallel when large) and recompute each
// element's multiplier m_i = keep_i / (1 - p) from the key as they go.
static void apply_in_chunks(float* out, const float* inp, size_t n, Dropout drop) {
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { dropout_apply_kernel(out + i0, inp + i0, len, drop, i0); });
}

void dropout_forward(float* out,        // (n)
                     const float* inp,  // (n)
                     size_t n, Dropout drop) {
    dropout_check("dropout_forward", n, drop);
    if (!drop.active()) {  // p = 0: the identity
        if (out != inp) std::memmove(out, inp, n * sizeof(float));
        return;
    }
    apply_in_chunks(out, inp, n, drop);
}

// Backward (derivation above dropout_backward_twin in dropout.h): out_i = inp_i · m_i with the
// mask fixed by the key, so dinp_i = dout_i · m_i — the same multipliers, recomputed from the
// same key, the same scale 1/(1-p), the same multiply as the forward.
void dropout_backward(float* dinp,        // (n)
                      const float* dout,  // (n)
                      size_t n, Dropout drop) {
    dropout_check("dropout_backward", n, drop);
    if (!drop.active()) {  // p = 0: the gradient passes unchanged
        if (dinp != dout) std::memmove(dinp, dout, n * sizeof(float));
        return;
    }
    apply_in_chunks(dinp, dout, n, drop);
}

}  // namespace hg
