// rmsnorm.h — RMSNorm over the last dimension C (Zhang & Sennrich 2019), with or without a gain.
//
//   rstd = 1 / sqrt(Σ_c x_c² / C + eps)
//   out_c = x_c · rstd · weight_c          (weight null: the gain-less form, weight_c = 1)
//
// N = B·T rows. rstd (N) is stored for the backward. Unlike LayerNorm no mean is subtracted
// and there is no bias: the row is only rescaled to unit root-mean-square.
//
// eps is the float 1e-5f in both precisions, the value LayerNorm uses here (layernorm.h), so the
// two norms are interchangeable in a block. PyTorch's RMSNorm takes eps = None by default,
// which means finfo(dtype).eps: 1.19e-7 in float32 but 2.2e-16 in float64, so a float64
// reference with the default would compute another function. A fixed eps is what a reference
// mirrors exactly in both precisions: F.rms_norm(x, (C,), weight, eps=1e-5).
//
// QK-norm (qknorm.h) is the gain-less form applied to each head of q and k.
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"

namespace hg {

constexpr float kRmsNormEps = 1e-5f;

// out (N,C); rstd (N); inp (N,C); weight (C) or null (no gain). out may alias inp.
// N, C <= 0 is hg::Error.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C);
// dinp (N,C) += (added, as LayerNorm's: in a block the norm's input is the residual stream,
// whose gradient also gets the skip path's; layers.h), dweight (C) += (null when weight is).
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);

template <typename real>
void rmsnorm_forward_twin(real* out, real* rstd, const real* inp, const real* weight, int N,
                          int C);
template <typename real>
void rmsnorm_backward_twin(real* dinp, real* dweight, const real* dout, const real* inp,
                           const real* weight, const real* rstd, int N, int C);

inline void rmsnorm_check(const char* fn, const void* weight, const void* dweight, int N, int C) {
    check(N > 0 && C > 0, "{}: sizes must be positive (N = {}, C = {})", fn, N, C);
    check(weight != nullptr || dweight == nullptr, "{}: dweight given for a norm without gain", fn);
}

// ---------------------------------------------------------------------------------------------
// Scalar twins: the plain-loop reference, run in double by the gradient checks and in float
// against the SIMD kernels (lib/kernels/rmsnorm_kernels.cpp).

template <typename real>
void rmsnorm_forward_twin(real* out,           // (N, C)
                          real* rstd,          // (N)
                          const real* inp,     // (N, C)
                          const real* weight,  // (C) or null
                          int N, int C) {
    rmsnorm_check("rmsnorm_forward", weight, nullptr, N, C);
    for (int n = 0; n < N; n++) {
        const real* inp_n = inp + (size_t)n * C;
        real* out_n = out + (size_t)n * C;
        real sq = 0;
        for (int c = 0; c < C; c++) sq += inp_n[c] * inp_n[c];
        const real s = real(1) / std::sqrt(sq / C + real(kRmsNormEps));
        for (int c = 0; c < C; c++) out_n[c] = inp_n[c] * s * (weight ? weight[c] : real(1));
        rstd[n] = s;
    }
}

// RMSNorm backward, one row at a time (rows are independent; weight is shared).
//
// Forward, for one row (x, dout, dx: (C); rstd: a scalar):
//   x̂_c   = x_c · rstd                        normalised input
//   out_c = x̂_c · weight_c
// Parameter: out depends on weight_c only through column c, so
//   dweight_c += Σ_rows dout_c · x̂_c                                            (line W)
// Input: let g_c = dout_c · weight_c = ∂L/∂x̂_c. Every x̂_j depends on every x_c through rstd:
//   rstd = (Σ x²/C + eps)^(-1/2),   ∂rstd/∂x_c = -rstd³ · x_c / C = -rstd² · x̂_c / C
//   ∂x̂_j/∂x_c = rstd · δ_jc + x_j · ∂rstd/∂x_c = rstd · (δ_jc - x̂_j · x̂_c / C)
// so
//   dx_c = Σ_j g_j ∂x̂_j/∂x_c = rstd · ( g_c  -  x̂_c · (1/C)Σ_j g_j x̂_j )
//        = rstd · ( g_c  -  x̂_c · mean(g ⊙ x̂) )                                   (line X)
// g_c is the direct path and x̂_c·mean(g⊙x̂) the path through rstd: the component of g along
// x̂ is removed, since scaling x leaves x̂ unchanged (dx · x = 0 when eps = 0). It is
// LayerNorm's backward without the mean(g) term, because no mean is subtracted. mean(g⊙x̂) is
// the row sum of line S. Without a gain, g = dout.
template <typename real>
void rmsnorm_backward_twin(real* dinp,          // (N, C)
                           real* dweight,       // (C) or null
                           const real* dout,    // (N, C)
                           const real* inp,     // (N, C)
                           const real* weight,  // (C) or null
                           const real* rstd,    // (N)
                           int N, int C) {
    rmsnorm_check("rmsnorm_backward", weight, dweight, N, C);
    for (int n = 0; n < N; n++) {
        const real* dout_n = dout + (size_t)n * C;
        const real* inp_n = inp + (size_t)n * C;
        real* dinp_n = dinp + (size_t)n * C;
        const real s = rstd[n];
        real sum_gxhat = 0;
        for (int c = 0; c < C; c++)
            sum_gxhat += dout_n[c] * (weight ? weight[c] : real(1)) * (inp_n[c] * s);  // line S
        const real mean_gxhat = sum_gxhat / C;
        for (int c = 0; c < C; c++) {
            const real xhat = inp_n[c] * s;
            const real g = dout_n[c] * (weight ? weight[c] : real(1));
            dinp_n[c] += s * (g - xhat * mean_gxhat);                                   // line X
            if (dweight) dweight[c] += dout_n[c] * xhat;                                // line W
        }
    }
}

}  // namespace hg
