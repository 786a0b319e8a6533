// linear.h — the affine map y = x·Wᵀ + b, with W stored [out, in] as PyTorch stores it.
//
// inp (N,C), weight (OC,C), bias (OC) or null, out (N,OC). Both passes are sgemm calls
// (lib/kernels/matmul.h). The backward writes the input's gradient and adds into the parameters'
// (layers.h):
//   dinp = dout · W,   dweight += doutᵀ · inp,   dbias += Σ_n dout[n]
#pragma once
#include <cstddef>

#include "lib/core/errors.h"
#include "lib/kernels/bf16.h"

namespace hg {

void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC);
// dinp may be null (its gradient is not needed); dbias is null when there is no bias.
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC);

// The same layer in mixed precision (dtype bfloat16): the products take bf16 inputs and add in
// float (lib/kernels/matmul_bf16.h). Its inputs arrive rounded, written by the layer that made
// them while they were in cache (a norm, GELU, attention: each has a bf16 variant), or by
// bf16_round_parallel where none does:
//   inp16    (N,C)  the input, rounded; the backward's dW product reads it again
//   weight16 (OC,C) W's bf16 copy (the optimizer keeps it)
//   dout16   (N,OC) dout rounded; dout itself (float) is read for the bias's gradient only
// out, dinp, dweight, dbias stay float.
void linear_forward_bf16(float* out, const bf16* inp16, const bf16* weight16, const float* bias, int N, int C,
                         int OC);
void linear_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout, const bf16* dout16,
                          const bf16* inp16, const bf16* weight16, int N, int C, int OC);

template <typename real>
void linear_forward_twin(real* out, const real* inp, const real* weight, const real* bias,
                         int N, int C, int OC);
template <typename real>
void linear_backward_twin(real* dinp, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* weight, int N, int C, int OC);

// The sizes every linear entry point checks (hg::Error naming the bad one).
inline void linear_check_sizes(int N, int C, int OC) {
    check(N > 0, "linear: number of rows N must be positive (N={})", N);
    check(C > 0, "linear: input width C must be positive (C={})", C);
    check(OC > 0, "linear: output width OC must be positive (OC={})", OC);
}

// ---- scalar twins (plain loops, any number type; the gradient checks run them in double) ----

// out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC)
template <typename real>
void linear_forward_twin(real* out, const real* inp, const real* weight, const real* bias,
                         int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    for (int n = 0; n < N; n++) {
        const real* inp_n = inp + (size_t)n * C;
        real* out_n = out + (size_t)n * OC;
        for (int o = 0; o < OC; o++) {
            const real* w_o = weight + (size_t)o * C;
            real sum = bias ? bias[o] : real(0);
            for (int c = 0; c < C; c++) sum += inp_n[c] * w_o[c];
            out_n[o] = sum;
        }
    }
}

// The derivation (the fast linear_backward in linear.cpp does the same three products as sgemm).
//
// Forward, one output entry:   out[n,o] = Σ_c inp[n,c] · W[o,c] + b[o]
// Shapes: inp (N,C), W (OC,C), b (OC), out (N,OC); dout = dL/dout (N,OC) is given.
// Chain rule, L depends on every out[n,o], so each input sums over the outputs it feeds:
//   dL/dinp[n,c] = Σ_o dout[n,o] · ∂out[n,o]/∂inp[n,c] = Σ_o dout[n,o] · W[o,c]
//                  i.e. dinp = dout · W               (N,OC)·(OC,C) = (N,C)     (term 1)
//   dL/dW[o,c]   = Σ_n dout[n,o] · ∂out[n,o]/∂W[o,c]   = Σ_n dout[n,o] · inp[n,c]
//                  i.e. dW = doutᵀ · inp              (OC,N)·(N,C) = (OC,C)     (term 2)
//   dL/db[o]     = Σ_n dout[n,o] · 1
//                  i.e. db = column sums of dout                    (OC)        (term 3)
// Terms 2 and 3 are added (+=), so a weight used twice (tied embeddings) collects both uses;
// term 1 is written (=): dinp is a fresh activation gradient.
template <typename real>
void linear_backward_twin(real* dinp, real* dweight, real* dbias, const real* dout,
                          const real* inp, const real* weight, int N, int C, int OC) {
    linear_check_sizes(N, C, OC);
    if (dinp)
        for (size_t i = 0; i < (size_t)N * C; i++) dinp[i] = real(0);
    for (int n = 0; n < N; n++) {
        const real* dout_n = dout + (size_t)n * OC;
        const real* inp_n = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const real d = dout_n[o];
            const real* w_o = weight + (size_t)o * C;
            real* dw_o = dweight + (size_t)o * C;
            for (int c = 0; c < C; c++) {
                if (dinp) dinp[(size_t)n * C + c] += d * w_o[c];  // term 1: dout · W
                dw_o[c] += d * inp_n[c];                          // term 2: doutᵀ · inp
            }
            if (dbias) dbias[o] += d;  // term 3: Σ_n dout[n]
        }
    }
}

}  // namespace hg
