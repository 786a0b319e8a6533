// attention_kernels.h — one (b, h) of causal attention, forward and backward, without sgemm:
// Highway kernels (dynamic dispatch; see simd.h) that keep a head's work in L1. The scalar twin
// and the derivation are attention_forward_twin / attention_backward_twin in
// lib/layers/attention.h; attention_forward_fused / attention_backward_fused
// (lib/layers/attention.cpp) run these per (b, h), and the float layer runs those where
// attention_uses_fused says (the course model's shape). The backward's steps are mapped to the
// derivation's at the top of AttentionHeadBackward (attention_kernels.cpp).
//
// One head: q, k, v are (T, hs) with row stride ld (slices of the fused (B, T, 3C) qkv), out
// and dout (T, hs) with row stride ldo, att and dS (T, T) with row stride T. Dropout entry
// (t, s) of this head is drop.keep(drop_base + t·T + s), the index attention.h defines.
//
// How the work stays small: scores are dot products q_t · k_s. The keys are taken 64 at a
// time and transposed into a stack tile (hs × 64, at most 32 KiB), so a row of scores is
// Σ_i q_t[i] · tile[i][·], four vectors of keys per broadcast of q_t[i], and only keys s ≤ t
// are computed (in whole vectors: the few entries past t are written, then overwritten or
// ignored). The products with v, k, q (out = P·v, dq = dS·k, dk = dSᵀ·q, dv = Pᵀ·dout) are
// sums of rows weighted by one row or one column of a (T, T) matrix, four vectors of the
// output per weight. Every sum runs in a fixed order, so the result does not depend on threads.
#pragma once
#include <cstddef>

#include "lib/kernels/dropout_kernels.h"

namespace hg {

// The shapes the fused kernels take: hs a multiple of 16 (whole vectors on every target) and at
// most 128 (the stack tile), T at most 1024 (a dropped row on the stack).
constexpr int kFusedMaxHs = 128, kFusedMaxT = 1024;
inline bool attention_fused_fits(int T, int hs) {
    return hs % 16 == 0 && hs >= 16 && hs <= kFusedMaxHs && T >= 1 && T <= kFusedMaxT;
}

// att (T,T) written: softmax(q·kᵀ/√hs) on s ≤ t, 0 above; out (T,hs) written: dropout(att)·v.
void attention_head_forward(float* out, size_t ldo, float* att, const float* q, const float* k,
                            const float* v, size_t ld, int T, int hs, Dropout drop,
                            size_t drop_base);

// dq, dk, dv (T,hs each, row stride ld) written; dS (T,T) working space; att from the forward.
void attention_head_backward(float* dq, float* dk, float* dv, float* dS, const float* dout,
                             size_t ldo, const float* q, const float* k, const float* v,
                             const float* att, size_t ld, int T, int hs, Dropout drop,
                             size_t drop_base);

}  // namespace hg
