// qknorm.cpp — the fast float QK-norm: per position, the 2·NH head slices of q and k (contiguous,
// hs numbers each) through the RMSNorm row kernels (lib/kernels/rmsnorm_kernels); positions
// split across OpenMP threads. The math is above qknorm_backward_scalar in qknorm.h.
#include "lib/layers/qknorm.h"

#include "lib/kernels/rmsnorm_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;

void qknorm_forward(float* qkv,   // (B, T, 3C)
                    float* rstd,  // (B, T, 2·NH)
                    int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_forward", B, T, C, NH);
    const int N = B * T, hs = C / NH;
    // Each position is done whole by one thread: results do not depend on the thread count.
#pragma omp parallel for schedule(static) if ((size_t)N * 2 * C > kParallelMin)
    for (int bt = 0; bt < N; bt++) {
        float* qk = qkv + (size_t)bt * 3 * C;  // (2·NH, hs): q's heads, then k's
        rmsnorm_forward_rows(qk, rstd + (size_t)bt * 2 * NH, qk, nullptr, kRmsNormEps, 2 * NH, hs);
    }
}

// dx = rstd · (dy - y · mean(dy ⊙ y)) per slice, y = the stored output    (lines S, X)
void qknorm_backward(float* dqkv,        // (B, T, 3C)
                     const float* qkv,   // (B, T, 3C)
                     const float* rstd,  // (B, T, 2·NH)
                     int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_backward", B, T, C, NH);
    const int N = B * T, hs = C / NH;
#pragma omp parallel for schedule(static) if ((size_t)N * 2 * C > kParallelMin)
    for (int bt = 0; bt < N; bt++) {
        const size_t off = (size_t)bt * 3 * C;
        rmsnorm_backward_from_output_rows(dqkv + off, dqkv + off, qkv + off,
                                          rstd + (size_t)bt * 2 * NH, 2 * NH, hs);
    }
}

}  // namespace hg
