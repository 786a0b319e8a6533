// qknorm.cpp — the fast float QK-norm: per position, the 2·NH head slices of q and k (contiguous,
// hs numbers each) through the RMSNorm row kernels (lib/kernels/rmsnorm_kernels); positions
// split across threads (lib/core/parallel.h). The math is above qknorm_backward_twin in qknorm.h.
#include "lib/layers/qknorm.h"

#include "lib/core/parallel.h"
#include "lib/kernels/rmsnorm_kernels.h"

namespace hg {

void qknorm_forward(float* qkv,   // (B, T, 3C)
                    float* rstd,  // (B, T, 2·NH)
                    int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_forward", B, T, C, NH);
    const int hs = C / NH;
    for_pieces(size_t(B) * T, 1, 2 * size_t(C), [&](size_t bt, size_t) {  // one position per piece
        float* qk = qkv + bt * 3 * C;  // (2·NH, hs): q's heads, then k's
        rmsnorm_forward_rows(qk, rstd + bt * 2 * NH, qk, nullptr, kRmsNormEps, 2 * NH, hs);
    });
}

// dx = rstd · (dy - y · mean(dy ⊙ y)) per slice, y = the stored output    (lines S, X)
void qknorm_backward(float* dqkv,        // (B, T, 3C)
                     const float* qkv,   // (B, T, 3C)
                     const float* rstd,  // (B, T, 2·NH)
                     int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_backward", B, T, C, NH);
    const int hs = C / NH;
    for_pieces(size_t(B) * T, 1, 2 * size_t(C), [&](size_t bt, size_t) {  // one position per piece
        const size_t off = bt * 3 * C;
        rmsnorm_backward_from_output_rows(dqkv + off, dqkv + off, qkv + off, rstd + bt * 2 * NH, 2 * NH, hs);
    });
}

}  // namespace hg
