// swiglu.h — SwiGLU's elementwise part (Shazeer 2020, "GLU Variants Improve Transformer"):
//
//   h = silu(a) ⊙ b,   silu(a) = a · σ(a),   σ(a) = 1 / (1 + e^(-a))
//
// In the MLP, a = x·W1ᵀ is the gate, b = x·W3ᵀ the up projection and the block's output is
// h·W2ᵀ: three matrices, each a linear layer (linear.h). W1 and W3 are stacked into one
// (2H, C) matrix [W1; W3], so a and b come out of a single matmul as one buffer:
//   inp (N, 2H), row n = [a_n (H) | b_n (H)],   out (N, H)
// and the backward writes dinp (N, 2H) = [da | db] in the same layout, ready for that
// matmul's backward.
//
// The hidden width: the GELU MLP has 2·C·4C = 8C² weights, SwiGLU 3·C·H, the same when
// H = 8C/3. swiglu_hidden rounds ⌈8C/3⌉ up to a multiple of 32, a multiple of every x86 and
// NEON vector width (16 floats on AVX-512) and of SVE's up to 1024 bits (wider, a tail
// remains). That is exact whenever C is a multiple of 12 (8C/3 = 32·C/12: C = 384 → 1024,
// C = 768 → 2048); the course's C = 128 gets 352, 3·128·352 = 135,168 weights
// against 131,072 (+3.1 %), and C = 64 gets 192 (+12.5 %). Rounding to 64 instead would give
// C = 128 384 (+12.5 %).
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"

namespace hg {

// H = ⌈8C/3⌉ rounded up to a multiple of 32 (C <= 0 is hg::Error).
inline int swiglu_hidden(int C) {
    check(C > 0, "swiglu_hidden: n_embd must be positive (C = {})", C);
    const long h = (8L * C + 2) / 3;  // ⌈8C/3⌉
    return int((h + 31) / 32 * 32);
}

// out (N,H); inp (N,2H) = [a | b] per row. Sizes <= 0 are hg::Error.
void swiglu_forward(float* out, const float* inp, int N, int H);
// dinp (N,2H) = [da | db] per row, written (=); inp (N,2H) as in the forward; dout (N,H).
// dinp may alias inp.
void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int H);

template <typename real>
void swiglu_forward_twin(real* out, const real* inp, int N, int H);
template <typename real>
void swiglu_backward_twin(real* dinp, const real* inp, const real* dout, int N, int H);

inline void swiglu_check(const char* fn, int N, int H) {
    check(N > 0 && H > 0, "{}: sizes must be positive (N = {}, H = {})", fn, N, H);
}

// ---------------------------------------------------------------------------------------------
// Scalar twins (the gradient checks run them in double).

// σ(a) and 1 - σ(a) = σ(-a), each as a quotient: no cancellation at either end.
template <typename real>
real sigmoid(real a) {
    return real(1) / (real(1) + std::exp(-a));
}

template <typename real>
void swiglu_forward_twin(real* out,        // (N, H)
                         const real* inp,  // (N, 2H)
                         int N, int H) {
    swiglu_check("swiglu_forward", N, H);
    for (int n = 0; n < N; n++) {
        const real* a = inp + (size_t)n * 2 * H;
        const real* b = a + H;
        real* out_n = out + (size_t)n * H;
        for (int i = 0; i < H; i++) out_n[i] = a[i] * sigmoid(a[i]) * b[i];
    }
}

// SwiGLU backward, elementwise: h_i = silu(a_i) · b_i, so with dh = dL/dh,
//   db_i = dh_i · silu(a_i)                                                        (line B)
//   da_i = dh_i · b_i · silu'(a_i)                                                 (line A)
// and silu'(a) by the product rule, with σ' = σ·(1 - σ):
//   silu'(a) = σ(a) + a · σ(a)·(1 - σ(a)) = σ(a) · (1 + a · (1 - σ(a)))            (line S)
// (silu' is not σ: the second term, up to 0.22, makes silu' exceed 1 for a > 1.27, up to 1.10
// at a = 2.4, and go negative for a < -1.28, down to -0.10 at a = -2.4).
template <typename real>
void swiglu_backward_twin(real* dinp,        // (N, 2H)
                          const real* inp,   // (N, 2H)
                          const real* dout,  // (N, H)
                          int N, int H) {
    swiglu_check("swiglu_backward", N, H);
    for (int n = 0; n < N; n++) {
        const real* a = inp + (size_t)n * 2 * H;
        const real* b = a + H;
        const real* dh = dout + (size_t)n * H;
        real* da = dinp + (size_t)n * 2 * H;
        real* db = da + H;
        for (int i = 0; i < H; i++) {
            const real s = sigmoid(a[i]), one_minus = sigmoid(-a[i]);
            const real dsilu = s * (real(1) + a[i] * one_minus);                    // line S
            const real ai = a[i];  // da may alias a (in place)
            da[i] = dh[i] * b[i] * dsilu;                                           // line A
            db[i] = dh[i] * (ai * s);                                               // line B
        }
    }
}

}  // namespace hg
