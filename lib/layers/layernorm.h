// layernorm.h — LayerNorm over the last dimension C (eps 1e-5, biased variance, as PyTorch).
//
//   mean = Σ_c x_c / C,  rstd = 1 / sqrt(Σ_c (x_c - mean)² / C + eps)
//   out_c = (x_c - mean) · rstd · weight_c + bias_c
//
// N = B·T rows. mean (N) and rstd (N) are stored for the backward. bias may be null
// (no bias), and then dbias must be null too.
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"
#include "lib/kernels/bf16.h"

namespace hg {

constexpr float kLayerNormEps = 1e-5f;

// out (N,C); mean (N); rstd (N); inp (N,C); weight (C); bias (C) or null.
// N, C <= 0 is hg::Error.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C);
// The same with its output rounded to bf16 into out16 (N,C) instead (dtype bfloat16: the next
// layer is a product that reads only the rounded copy; lib/layers/linear.h): each row is
// normalised into a buffer of the thread's own and rounded from there, so the float output is
// not written anywhere. mean and rstd are written as above. Bits: layernorm_forward's, rounded.
void layernorm_forward_bf16(bf16* out16, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C);
// dinp (N,C) +=, dweight (C) +=, dbias (C) += (skipped when null).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);

template <typename real>
void layernorm_forward_twin(real* out, real* mean, real* rstd, const real* inp,
                            const real* weight, const real* bias, int N, int C);
template <typename real>
void layernorm_backward_twin(real* dinp, real* dweight, real* dbias, const real* dout,
                             const real* inp, const real* weight, const real* mean,
                             const real* rstd, int N, int C);

// ---------------------------------------------------------------------------------------------
// Scalar twins: the plain-loop reference, run in double by the gradient checks and in float
// against the SIMD kernels (lib/kernels/layernorm_kernels.cpp).

template <typename real>
void layernorm_forward_twin(real* out,           // (N, C)
                            real* mean,          // (N)
                            real* rstd,          // (N)
                            const real* inp,     // (N, C)
                            const real* weight,  // (C)
                            const real* bias,    // (C) or null
                            int N, int C) {
    check(N > 0 && C > 0, "layernorm_forward: sizes must be positive (N = {}, C = {})", N, C);
    for (int n = 0; n < N; n++) {
        const real* inp_n = inp + (size_t)n * C;
        real* out_n = out + (size_t)n * C;
        real sum = 0;
        for (int c = 0; c < C; c++) sum += inp_n[c];
        const real m = sum / C;
        real sq = 0;  // two passes: Σ(x - mean)² does not cancel the way Σx² - C·mean² does
        for (int c = 0; c < C; c++) sq += (inp_n[c] - m) * (inp_n[c] - m);
        const real s = real(1) / std::sqrt(sq / C + real(kLayerNormEps));
        for (int c = 0; c < C; c++) {
            const real xhat = (inp_n[c] - m) * s;
            out_n[c] = xhat * weight[c] + (bias ? bias[c] : real(0));
        }
        mean[n] = m;
        rstd[n] = s;
    }
}

// LayerNorm backward, one row at a time (every row is independent; weight/bias are shared).
//
// Forward, for one row (x, dout, dx: (C); mean, rstd: scalars):
//   x̂_c   = (x_c - mean) · rstd                       normalised input
//   out_c = x̂_c · weight_c + bias_c
// Parameters: out depends on weight_c and bias_c only through column c, so
//   dbias_c   += Σ_rows dout_c                                            (line B)
//   dweight_c += Σ_rows dout_c · x̂_c                                      (line W)
// Input: let g_c = dout_c · weight_c = ∂L/∂x̂_c. Every x̂_j depends on every x_c through mean
// and rstd:
//   ∂mean/∂x_c = 1/C
//   ∂rstd/∂x_c = -rstd³ · (x_c - mean)/C = -rstd² · x̂_c / C      (var = Σ(x-mean)²/C; the
//                                                                   mean term sums to 0)
//   ∂x̂_j/∂x_c = rstd · (δ_jc - 1/C) - x̂_j · rstd · x̂_c / C
// so
//   dx_c = Σ_j g_j ∂x̂_j/∂x_c
//        = rstd · ( g_c  -  (1/C)Σ_j g_j  -  x̂_c · (1/C)Σ_j g_j x̂_j )
//        = rstd · ( g_c  -  mean(g)  -  x̂_c · mean(g ⊙ x̂) )                (line X)
// Term by term: g_c is the direct path, mean(g) the path through mean, and x̂_c·mean(g⊙x̂)
// the path through rstd. mean(g) and mean(g⊙x̂) are the two row sums of line S.
template <typename real>
void layernorm_backward_twin(real* dinp,          // (N, C)
                             real* dweight,       // (C)
                             real* dbias,         // (C) or null
                             const real* dout,    // (N, C)
                             const real* inp,     // (N, C)
                             const real* weight,  // (C)
                             const real* mean,    // (N)
                             const real* rstd,    // (N)
                             int N, int C) {
    check(N > 0 && C > 0, "layernorm_backward: sizes must be positive (N = {}, C = {})", N, C);
    for (int n = 0; n < N; n++) {
        const real* dout_n = dout + (size_t)n * C;
        const real* inp_n = inp + (size_t)n * C;
        real* dinp_n = dinp + (size_t)n * C;
        const real m = mean[n], s = rstd[n];
        real sum_g = 0, sum_gxhat = 0;
        for (int c = 0; c < C; c++) {
            const real xhat = (inp_n[c] - m) * s;
            const real g = dout_n[c] * weight[c];
            sum_g += g;                                       // line S
            sum_gxhat += g * xhat;                            // line S
        }
        const real mean_g = sum_g / C, mean_gxhat = sum_gxhat / C;
        for (int c = 0; c < C; c++) {
            const real xhat = (inp_n[c] - m) * s;
            const real g = dout_n[c] * weight[c];
            dinp_n[c] += s * (g - mean_g - xhat * mean_gxhat);  // line X
            dweight[c] += dout_n[c] * xhat;                     // line W
            if (dbias) dbias[c] += dout_n[c];                   // line B
        }
    }
}

}  // namespace hg
