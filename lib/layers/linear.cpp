// linear.cpp — the affine layer as sgemm calls (see linear.h; its scalar twin there carries
// the loop-by-loop derivation).
#include "lib/layers/linear.h"

#include <algorithm>
#include <cstring>

#include "lib/kernels/vec.h"
#include "lib/matmul.h"

namespace hg {

// out (N,OC), inp (N,C), weight (OC,C), bias (OC) or null.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    // With a bias, copy it into every row of out first and let the sgemm add onto it
    // (beta = 1); that is one pass over out instead of a second one after the product.
    if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)N * OC > (1u << 18))
        for (int n = 0; n < N; n++) std::memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
    }
    // out = inp · weightᵀ (+ out):  (N,C)·(OC,C)ᵀ = (N,OC)
    matmul_nt(out, inp, weight, N, OC, C, C, C, OC, 1.0f, bias ? 1.0f : 0.0f);
}

// Columns of dbias per task in the column sums: a fixed split, so every dbias entry is summed
// over n in the same order whatever the thread count.
constexpr int kBiasCols = 64;

// Backward of out = inp·Wᵀ + b, given dout = dL/dout (N,OC). Derivation in linear.h, above
// linear_backward_scalar:
//   term 1  dinp    += dout · W         (N,OC)·(OC,C)    matmul_nn, beta = 1
//   term 2  dweight += doutᵀ · inp      (OC,N)·(N,C)     matmul_tn, beta = 1
//   term 3  dbias   += Σ_n dout[n,:]    column sums      vec_acc down each column block
// dinp (N,C) or null, dweight (OC,C), dbias (OC) or null, dout (N,OC), inp (N,C), weight (OC,C).
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    if (dinp) matmul_nn(dinp, dout, weight, N, C, OC, OC, C, C, 1.0f, 1.0f);  // term 1
    matmul_tn(dweight, dout, inp, OC, C, N, OC, C, C, 1.0f, 1.0f);            // term 2
    if (dbias) {                                                              // term 3
        const int nblocks = (OC + kBiasCols - 1) / kBiasCols;
#pragma omp parallel for schedule(static) if ((size_t)N * OC > (1u << 18))
        for (int blk = 0; blk < nblocks; blk++) {
            const int o0 = blk * kBiasCols;
            const size_t width = (size_t)std::min(kBiasCols, OC - o0);
            for (int n = 0; n < N; n++) vec_acc(dbias + o0, dout + (size_t)n * OC + o0, width);
        }
    }
}

}  // namespace hg
