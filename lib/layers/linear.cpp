// linear.cpp — the affine layer as products (lib/kernels/matmul.h; see linear.h, whose scalar
// twin carries the loop-by-loop derivation).
#include "lib/layers/linear.h"

#include <cstring>

#include "lib/core/parallel.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/vec.h"

namespace hg {

// out (N,OC), inp (N,C), weight (OC,C), bias (OC) or null.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    // With a bias, copy it into every row of out first and let the product add onto it (beta =
    // 1): one pass over out instead of a second one after the product.
    if (bias)
        for_pieces(N, 64, OC, [&](size_t n0, size_t rows) {
            for (size_t n = n0; n < n0 + rows; n++) std::memcpy(out + n * OC, bias, sizeof(float) * OC);
        });
    // out (N,OC) = inp (N,C) · weight (OC,C)ᵀ (+ out)
    matmul_nt({out, N, OC, OC}, {inp, N, C, C}, {weight, OC, C, C}, 1.0f, bias ? 1.0f : 0.0f);
}

constexpr size_t kBiasCols = 64;  // columns of dbias per piece of parallel work

// Backward of out = inp·Wᵀ + b, given dout = dL/dout (N,OC). Derivation in linear.h, above
// linear_backward_twin:
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
    const Mat<const float> dout_m{dout, N, OC, OC}, inp_m{inp, N, C, C}, weight_m{weight, OC, C, C};
    if (dinp) matmul_nn({dinp, N, C, C}, dout_m, weight_m, 1.0f, 0.0f);  // term 1
    matmul_tn({dweight, OC, C, C}, dout_m, inp_m, 1.0f, 1.0f);           // term 2
    if (dbias) bias_backward(dbias, dout, N, OC);                         // term 3
}

// ---- bf16 inputs, float sums and outputs (linear.h) -----------------------------------------
// Where precision is dropped: the three products' inputs only — inp, W and dout, each rounded to
// bf16 before it reaches this layer (relative error ≤ 2⁻⁸ each; linear.h says by whom). Each
// product of two bf16 numbers is exact in float and the sums run in float, so a product's error
// is ≤ (2·2⁻⁸ + K·2⁻²⁴)·Σ|terms| (tests/test_bf16.cpp).
// Where it is kept: out, dinp and dweight are float, and dweight += adds the product into the
// float gradient, so accumulation over micro-batches and tied uses loses nothing. The bias and
// its gradient stay float: dbias sums dout itself (float), not its rounded copy — a sum of N
// numbers gains nothing from bf16 and would keep their rounding errors.
void linear_forward_bf16(float* out, const bf16* inp16, const bf16* weight16, const float* bias, int N, int C,
                         int OC) {
    linear_check_sizes(N, C, OC);
    // out (N,OC) = inp16 (N,C) · weight16 (OC,C)ᵀ (+ bias): one product, threaded by the backend itself
    if (bias)
        matmul_bf16_nt_bias({out, N, OC, OC}, {inp16, N, C, C}, {weight16, OC, C, C}, bias);
    else
        matmul_bf16_nt({out, N, OC, OC}, {inp16, N, C, C}, {weight16, OC, C, C}, 1.0f, 0.0f);
}

void linear_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* dout16,
                          const bf16* inp16, const bf16* weight16, int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    const Mat<const bf16> dout_m{dout16, N, OC, OC};
    if (dinp) matmul_bf16_nn({dinp, N, C, C}, dout_m, {weight16, OC, C, C}, 1.0f, 0.0f);  // term 1
    matmul_bf16_tn({dweight, OC, C, C}, dout_m, {inp16, N, C, C}, 1.0f, 1.0f);            // term 2
    if (dbias) bias_backward(dbias, dout, N, OC);                                         // term 3, float
}

}  // namespace hg
