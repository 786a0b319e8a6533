// attention.h — causal multi-head self-attention, all heads in one pass.
//
// qkv (B,T,3C) is the fused projection's output: for each position, q (C) then k (C) then
// v (C), each holding NH heads of hs = C/NH contiguous numbers. For each (b, h):
//   scores = q·kᵀ / √hs            (T,T), masked so position t sees only s ≤ t
//   att    = softmax(scores)        (T,T), rows sum to 1 over s ≤ t
//   out    = dropout(att) · v       (T,hs), written into head h's slice of out (B,T,C)
// The output projection is a separate linear layer.
//
// Stored for the backward: att (B,NH,T,T), the pre-dropout probabilities. The forward writes
// zeros above the diagonal (s > t), but the backward never reads them. The dropout mask is not
// stored: keep is a pure function of (drop.key, i) with i = ((b·NH + h)·T + t)·T + s, the
// index of the probability in att, so the backward recomputes it. qkv is kept by the caller.
//
// Sizes must be positive and C divisible by NH (hg::Error otherwise).
//
// Which function runs. The derivation is above attention_backward_twin (below), the scalar
// twin, whose loops follow it step by step. attention_forward / attention_backward are the float
// fast path; each picks one of two ways by shape (attention_uses_fused, attention.cpp):
//   fused   small heads on short rows (hs ≤ 32, T ≤ 64: the course model): one Highway kernel
//           per (b, h), attention_head_forward / attention_head_backward
//           (lib/kernels/attention_kernels.cpp), the derivation's steps in another order, mapped
//           at the top of AttentionHeadBackward;
//   sgemm   every other shape (the baby GPT's T = 256): products on blocks of 64 query rows,
//           attention_forward_sgemm / attention_backward_sgemm (attention.cpp), commented with
//           the same step numbers.
// A model in bf16 runs attention_forward_bf16 / attention_backward_bf16 instead (attention_bf16.cpp).
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"
#include "lib/kernels/bf16.h"
#include "lib/kernels/softmax_kernels.h"
#include "lib/layers/dropout.h"

namespace hg {

// out (B,T,C) written, att (B,NH,T,T) written, qkv (B,T,3C).
// scratch: (B,NH,T,T) numbers of working space for the dropped probabilities (unused, and may
// be null, when dropout is off).
void attention_forward(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                       int C, int NH, Dropout drop);
// dqkv (B,T,3C) written (=), dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T) from the forward, the same
// drop as the forward. scratch: (B,NH,T,T) numbers of working space (contents not used after).
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, Dropout drop);

// The two ways, with the same contract. attention_forward/backward run the fused one where
// attention_uses_fused(T, hs), else the sgemm one.
bool attention_uses_fused(int T, int hs);
// hg::Error unless attention_fused_fits(T, C/NH) (lib/kernels/attention_kernels.h).
void attention_forward_fused(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                             int C, int NH, Dropout drop);
void attention_backward_fused(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop);
void attention_forward_sgemm(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                             int C, int NH, Dropout drop);
void attention_backward_sgemm(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop);

// Mixed precision (the model's dtype bfloat16): the sgemm path with its six products on bf16
// inputs, sums and outputs in float (lib/kernels/matmul_bf16.h; attention_bf16.cpp says what is
// rounded and what stays float). The same contract as the float pair: out, att and dqkv written
// (=), nothing added to; the same scratch. out16 (B·T, C) and dqkv16 (B·T, 3C), when not null,
// also get out and dqkv rounded to bf16, for the next product (lib/layers/linear.h): each head's
// part as soon as it is final, while it is in cache. scratch16: attention_bf16_scratch(B, T, C,
// NH) bf16 numbers of working space. They run at every shape, also where the float path would
// take the fused kernels (faster there too: docs/performance.md).
size_t attention_bf16_scratch(int B, int T, int C, int NH);
void attention_forward_bf16(float* out, bf16* out16, float* att, float* scratch, bf16* scratch16, const float* qkv,
                            int B, int T, int C, int NH, Dropout drop);
void attention_backward_bf16(float* dqkv, bf16* dqkv16, float* scratch, bf16* scratch16, const float* dout,
                             const float* qkv, const float* att, int B, int T, int C, int NH, Dropout drop);

template <typename real>
void attention_forward_twin(real* out, real* att, real* scratch, const real* qkv, int B, int T, int C,
                            int NH, Dropout drop);
template <typename real>
void attention_backward_twin(real* dqkv, real* scratch, const real* dout, const real* qkv,
                             const real* att, int B, int T, int C, int NH, Dropout drop);

// The checks every attention entry point makes (hg::Error naming the bad value). scratch may be
// null only in a forward without dropout.
inline void attention_check(int B, int T, int C, int NH, Dropout drop, const void* scratch, bool backward) {
    check(B > 0, "attention: batch size B must be positive (B={})", B);
    check(T > 0, "attention: sequence length T must be positive (T={})", T);
    check(C > 0, "attention: n_embd C must be positive (C={})", C);
    check(NH > 0, "attention: n_head must be positive (NH={})", NH);
    check(C % NH == 0, "n_embd (C={}) must be divisible by n_head ({})", C, NH);
    check(drop.p >= 0.0f && drop.p < 1.0f, "attention: dropout p must be in [0, 1) (p={})", drop.p);
    check(scratch != nullptr || (!backward && !drop.active()), "attention: {} needs scratch",
          backward ? "the backward" : "dropout");
}

// The factor dropout multiplies probability i by: 1 without dropout, else keep_i / (1 - p).
template <typename real>
real attention_dropout_factor(Dropout drop, size_t i) {
    if (!drop.active()) return real(1);
    return drop.keep(i) ? real(1) / (real(1) - real(drop.p)) : real(0);
}

// ---- scalar twins (plain loops, any number type; the gradient checks run them in double) ----
// They loop over (b, h, t) and touch only s ≤ t.

template <typename real>
void attention_forward_twin(real* out, real* att, real* scratch, const real* qkv, int B, int T, int C,
                            int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const real scale = real(1) / std::sqrt(real(hs));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const real* q_t = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                const size_t row = (((size_t)b * NH + h) * T + t) * T;  // att index of (t, 0)
                real* att_t = att + row;
                // scores for s ≤ t only: the causal mask
                for (int s = 0; s <= t; s++) {
                    const real* k_s = qkv + ((size_t)b * T + s) * C3 + C + (size_t)h * hs;
                    real dot = 0;
                    for (int i = 0; i < hs; i++) dot += q_t[i] * k_s[i];
                    att_t[s] = dot * scale;
                }
                softmax_row_scalar(att_t, att_t, (size_t)t + 1);
                for (int s = t + 1; s < T; s++) att_t[s] = real(0);  // masked: probability 0
                // P_t = dropout(att_t), into scratch: att keeps the probabilities for the backward
                const real* P_t = att_t;
                if (drop.active()) {
                    real* dropped = scratch + row;
                    for (int s = 0; s <= t; s++)
                        dropped[s] = att_t[s] * attention_dropout_factor<real>(drop, row + s);
                    P_t = dropped;
                }
                // out_t = Σ_{s ≤ t} P[t,s] · v_s
                real* out_t = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) out_t[i] = real(0);
                for (int s = 0; s <= t; s++) {
                    const real* v_s =
                        qkv + ((size_t)b * T + s) * C3 + 2 * (size_t)C + (size_t)h * hs;
                    for (int i = 0; i < hs; i++) out_t[i] += P_t[s] * v_s[i];
                }
            }
}

// The derivation. The fast paths number their steps by it: attention_backward_sgemm
// (attention.cpp) and the fused kernel's AttentionHeadBackward (lib/kernels/attention_kernels.cpp).
//
// Forward, for one (b, h), rows t and columns s of the (T,T) matrices, s ≤ t only:
//   S[t,s] = q_t · k_s / √hs                          scores            q, k, v: (T,hs)
//   A[t,s] = exp(S[t,s]) / Σ_{s' ≤ t} exp(S[t,s'])    softmax over the visible row
//   P[t,s] = A[t,s] · m[t,s] / (1 - p)                dropout, m = keep mask (P = A when p = 0)
//   out_t  = Σ_{s ≤ t} P[t,s] · v_s                   out: (T,hs)
// Given dout = dL/dout (T,hs):
//   1. out = P·v, a product:   dP[t,s] = dout_t · v_s        (dP = dout · vᵀ)
//                              dv_s   += Σ_t P[t,s] · dout_t  (dv += Pᵀ · dout)
//   2. dropout is a fixed scale per entry:   dA[t,s] = dP[t,s] · m[t,s] / (1 - p)
//   3. softmax, one row at a time. Its Jacobian is ∂A[t,s]/∂S[t,j] = A[t,s] (δ_sj - A[t,j]):
//        dS[t,j] = Σ_s dA[t,s] A[t,s] (δ_sj - A[t,j]) = A[t,j] · (dA[t,j] - Σ_s A[t,s] dA[t,s])
//      The mask: a masked score (j > t) is the constant -∞, not a function of q or k, and its
//      probability is exactly 0; so the sums run over s ≤ t only and dS[t,j] = 0 for j > t.
//      No gradient reaches q_t from a future key, nor k_j from an earlier query.
//   4. S = q·kᵀ/√hs, a product:  dq_t += Σ_j dS[t,j] · k_j / √hs   (dq += dS · k / √hs)
//                                dk_j += Σ_t dS[t,j] · q_t / √hs   (dk += dSᵀ · q / √hs)
// dq, dk, dv are head h's slices of dqkv. dqkv is written: it starts at 0, then every
// (t, s) pair adds its part.
template <typename real>
void attention_backward_twin(real* dqkv, real* scratch, const real* dout, const real* qkv,
                             const real* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const real scale = real(1) / std::sqrt(real(hs));
    for (size_t i = 0; i < (size_t)B * T * C3; i++) dqkv[i] = real(0);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const size_t off_t = ((size_t)b * T + t) * C3 + (size_t)h * hs;  // q_t in qkv
                const real* q_t = qkv + off_t;
                real* dq_t = dqkv + off_t;
                const real* dout_t = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const size_t row = (((size_t)b * NH + h) * T + t) * T;
                const real* att_t = att + row;
                real* dS_t = scratch + row;  // dA, then dS, for s ≤ t
                for (int s = 0; s <= t; s++) {
                    const size_t off_s = ((size_t)b * T + s) * C3 + (size_t)h * hs;  // q_s in qkv
                    const real* v_s = qkv + off_s + 2 * (size_t)C;
                    real* dv_s = dqkv + off_s + 2 * (size_t)C;
                    const real f = attention_dropout_factor<real>(drop, row + s);
                    real dP = 0;
                    for (int i = 0; i < hs; i++) {
                        dP += dout_t[i] * v_s[i];              // step 1: dP = dout · vᵀ
                        dv_s[i] += att_t[s] * f * dout_t[i];   // step 1: dv += Pᵀ · dout
                    }
                    dS_t[s] = dP * f;                          // step 2: dA = dP · m/(1-p)
                }
                softmax_backward_row_scalar(dS_t, att_t, dS_t, (size_t)t + 1);  // step 3
                for (int s = 0; s <= t; s++) {                 // step 4 (j > t: dS = 0, skipped)
                    const size_t off_s = ((size_t)b * T + s) * C3 + (size_t)h * hs;
                    const real* k_s = qkv + off_s + C;
                    real* dk_s = dqkv + off_s + C;
                    for (int i = 0; i < hs; i++) {
                        dq_t[i] += dS_t[s] * k_s[i] * scale;   // dq += dS · k / √hs
                        dk_s[i] += dS_t[s] * q_t[i] * scale;   // dk += dSᵀ · q / √hs
                    }
                }
            }
}

}  // namespace hg
