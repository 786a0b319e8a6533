// encoder.cpp — the fast float token + position embedding. Forward: one vec_add (Highway) per
// row, rows split across threads (lib/core/parallel.h). Backward: a serial scatter-add (see below).
#include "lib/layers/encoder.h"

#include <cstring>

#include "lib/core/parallel.h"
#include "lib/kernels/vec.h"

namespace hg {

void encoder_forward(float* out,         // (B, T, C)
                     const int* idx,     // (B, T)
                     const float* wte,   // (V, C)
                     const float* wpe,   // (>= T, C) or null
                     int B, int T, int C, int V) {
    encoder_check_sizes("encoder_forward", B, T, C);
    check(V > 0, "encoder_forward: V ({}) must be positive", V);
    encoder_check_tokens(idx, B, T, V);  // all of them, before any write (and not in a thread)
    for_pieces(size_t(B) * T, 1, C, [&](size_t bt, size_t) {  // one row (b, t) per piece
        const size_t t = bt % T;
        const float* wte_ix = wte + (size_t)idx[bt] * C;
        if (wpe)
            vec_add(out + bt * C, wte_ix, wpe + t * C, C);
        else
            std::memcpy(out + bt * C, wte_ix, C * sizeof(float));
    });
}

// Backward (derivation above encoder_backward_twin in encoder.h):
//   dwte[idx[b,t], :] += dout[b,t,:]   (line V)      dwpe[t, :] += dout[b,t,:]   (line P)
// Kept serial: two rows (b,t) with the same token add into the same dwte row, so a parallel
// loop over rows would race. The loop is a memory-bound B·T·C adds, tiny next to the matmuls.
void encoder_backward(float* dwte,        // (V, C)
                      float* dwpe,        // (T, C) or null (a fixed table, or none)
                      const float* dout,  // (B, T, C)
                      const int* idx,     // (B, T)
                      int B, int T, int C) {
    encoder_check_sizes("encoder_backward", B, T, C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t bt = (size_t)b * T + t;
            const float* dout_bt = dout + bt * C;
            vec_acc(dwte + (size_t)idx[bt] * C, dout_bt, C);       // line V
            if (dwpe) vec_acc(dwpe + (size_t)t * C, dout_bt, C);   // line P
        }
}

}  // namespace hg
