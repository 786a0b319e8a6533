// linear.cpp — the affine layer as sgemm calls (see linear.h; its scalar twin there carries
// the loop-by-loop derivation).
#include "lib/layers/linear.h"

#include <cstring>

#include <omp.h>

#include "lib/core/parallel.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/vec.h"

namespace hg {

// out (N,OC), inp (N,C), weight (OC,C), bias (OC) or null.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    // Each thread takes a contiguous block of rows and runs its own sgemm on it (OpenBLAS's
    // OpenMP build runs single-threaded inside our parallel region). For the narrow shapes of a
    // small GPT (768 rows × 128..512) this beats one sgemm that OpenBLAS splits itself by up to
    // 20 % (measured with build/bench). The split follows the thread count, and OpenBLAS may
    // round a block's edge rows differently (measured: 768-row shapes split in two are
    // bit-identical to one block, N = 1000 or 37 differ in ~2-20 % of entries), so the output is
    // bit-identical for a given thread count, within float rounding across counts.
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int n0 = int((long long)N * t / nt), n1 = int((long long)N * (t + 1) / nt);
        if (n1 > n0) {
            // With a bias, copy it into every row of out first and let the sgemm add onto it
            // (beta = 1); that is one pass over out instead of a second one after the product.
            if (bias)
                for (int n = n0; n < n1; n++) std::memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
            // out = inp · weightᵀ (+ out):  (N,C)·(OC,C)ᵀ = (N,OC), rows [n0, n1)
            matmul_nt(out + (size_t)n0 * OC, inp + (size_t)n0 * C, weight, n1 - n0, OC, C, C, C, OC, 1.0f,
                      bias ? 1.0f : 0.0f);
        }
    }
}

constexpr size_t kBiasCols = 64;  // columns of dbias per piece of parallel work

// Backward of out = inp·Wᵀ + b, given dout = dL/dout (N,OC). Derivation in linear.h, above
// twin::linear_backward:
//   term 1  dinp     = dout · W         (N,OC)·(OC,C)    matmul_nn, beta = 0
//   term 2  dweight += doutᵀ · inp      (OC,N)·(N,C)     matmul_tn, beta = 1
//   term 3  dbias   += Σ_n dout[n,:]    column sums      vec_acc down each column block
// dinp (N,C) or null, dweight (OC,C), dbias (OC) or null, dout (N,OC), inp (N,C), weight (OC,C).
// dbias += Σ_n dout[n, :], over fixed blocks of columns, each summed in row order.
static void bias_backward(float* dbias, const float* dout, int N, int OC) {
    for_pieces(OC, kBiasCols, N, [&](size_t o0, size_t width) {
        for (int n = 0; n < N; n++) vec_acc(dbias + o0, dout + (size_t)n * OC + o0, width);
    });
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    // Terms 1 and 2 are independent products of the same size (N·C·OC multiply-adds each). With
    // one thread per product — two threads — they run side by side, each sgemm single-threaded:
    // for small shapes that beats splitting each product across both threads (measured 3-10 %
    // per layer). With more threads the side-by-side form would leave all but two idle, since
    // OpenBLAS runs single-threaded inside a parallel region and cannot be handed a team of
    // threads per product; so then, and on one thread, the products run one after the other,
    // each threaded by OpenBLAS.
    // Thread 0 always takes term 1 and thread 1 term 2 (not OpenMP sections, which hand them out
    // in whatever order the threads arrive): a thread keeps the products it ran in the first step,
    // and oneDNN's primitives, made per calling thread on first use, are then all made there.
    if (omp_get_max_threads() == 2 && dinp && !omp_in_parallel()) {
#pragma omp parallel num_threads(2)
        {
            const int t = omp_get_thread_num(), last = omp_get_num_threads() - 1;  // a team of 1 does both
            if (t == 0) matmul_nn(dinp, dout, weight, N, C, OC, OC, C, C, 1.0f, 0.0f);  // term 1
            if (t == last) {
                matmul_tn(dweight, dout, inp, OC, C, N, OC, C, C, 1.0f, 1.0f);  // term 2
                if (dbias) bias_backward(dbias, dout, N, OC);                    // term 3
            }
        }
        return;
    }
    if (dinp) matmul_nn(dinp, dout, weight, N, C, OC, OC, C, C, 1.0f, 0.0f);  // term 1
    matmul_tn(dweight, dout, inp, OC, C, N, OC, C, C, 1.0f, 1.0f);            // term 2
    if (dbias) bias_backward(dbias, dout, N, OC);                              // term 3
}

// ---- bf16 inputs, float sums and outputs (linear.h) -----------------------------------------
// Where precision is dropped: the three products' inputs only — inp, W and dout, each rounded to
// bf16 before it reaches this layer (relative error ≤ 2⁻⁸ each; linear.h says by whom). Each product of two bf16 numbers is exact in float and the sums
// run in float, so a product's error is ≤ (2·2⁻⁸ + K·2⁻²⁴)·Σ|terms| (tests/test_bf16.cpp).
// Where it is kept: out, dinp and dweight are float, and dweight += adds the product into the
// float gradient, so accumulation over micro-batches and tied uses loses nothing. The bias and
// its gradient stay float: dbias sums dout itself (float), not its rounded copy — a sum of N
// numbers gains nothing from bf16 and would keep their rounding errors.
void linear_forward_bf16(float* out, const bf16* inp16, const bf16* weight16, const float* bias, int N, int C,
                         int OC) {
    linear_check_sizes(N, C, OC);
    // out = inp16 · weight16ᵀ (+ bias): one product, threaded by the backend itself
    if (bias)
        matmul_bf16_nt_bias(out, inp16, weight16, bias, N, OC, C, C, C, OC);
    else
        matmul_bf16_nt(out, inp16, weight16, N, OC, C, C, C, OC, 1.0f, 0.0f);
}

void linear_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* dout16,
                          const bf16* inp16, const bf16* weight16, int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    if (dinp) matmul_bf16_nn(dinp, dout16, weight16, N, C, OC, OC, C, C, 1.0f, 0.0f);  // term 1
    matmul_bf16_tn(dweight, dout16, inp16, OC, C, N, OC, C, C, 1.0f, 1.0f);            // term 2
    if (dbias) bias_backward(dbias, dout, N, OC);                                       // term 3, float
}

}  // namespace hg
