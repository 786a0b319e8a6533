// attention_kernels.cpp — Highway implementations of attention_kernels.h, compiled for every
// target by foreach_target.h. The math is attention_forward_twin / attention_backward_twin's
// (lib/layers/attention.h), whose derivation numbers the backward's steps 1–4; the backward here
// does them in another order, mapped at the top of AttentionHeadBackward.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/attention_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/kernels/attention_kernels.h"
#include "lib/kernels/softmax_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// At most 16 lanes (512 bits): the tile's 64 keys are then four whole vectors and a head of
// hs = 16k whole vectors on every target (attention_fused_fits). SVE's vectors can be up to
// 2048 bits wide; there this uses the first 512 of them (on x86 and NEON it is the full vector).
using D = hn::CappedTag<float, 16>;
using V = hn::Vec<D>;

constexpr int kKeys = 64;  // keys per transposed tile (four vectors of at most 16 lanes)

// S (T, T), row stride T: S[t·T + s] = scale · a_t · b_s for every t in [0, T) and s in [0, t],
// where a (T, hs) has row stride lda and b (T, hs) row stride ldb (a_t = a + t·lda, b_s = b +
// s·ldb). Entries s in (t, T) of a row may be written too (whole vectors); nothing at s >= T is.
void CausalRowDots(float* S, const float* a, size_t lda, const float* b, size_t ldb, int T, int hs,
                   float scale) {
    const D d;
    const int L = int(hn::Lanes(d)), G = 4 * L;  // G columns: four accumulators
    HWY_ALIGN float tile[kFusedMaxHs * kKeys];   // tile[i·kKeys + j] = b_{j0 + j}[i], 0-padded
    HWY_ALIGN float last[kKeys];                 // a group that would run past column T
    const V vscale = hn::Set(d, scale);
    for (int j0 = 0; j0 < T; j0 += kKeys) {
        const int j1 = std::min(T, j0 + kKeys);
        for (int i = 0; i < hs; i++) {
            float* row = tile + i * kKeys;
            for (int j = j0; j < j1; j++) row[j - j0] = b[size_t(j) * ldb + i];
            for (int j = j1 - j0; j < kKeys; j++) row[j] = 0.0f;
        }
        for (int t = j0; t < T; t++) {
            const float* a_t = a + size_t(t) * lda;
            float* S_t = S + size_t(t) * T + j0;
            const int cols = std::min(t + 1, j1) - j0;  // keys j0 .. min(t, j1 - 1)
            for (int g = 0; g < cols; g += G) {
                V acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
                const float* col = tile + g;
                for (int i = 0; i < hs; i++) {
                    const V ai = hn::Set(d, a_t[i]);
                    const float* r = col + i * kKeys;
                    acc0 = hn::MulAdd(ai, hn::Load(d, r), acc0);
                    acc1 = hn::MulAdd(ai, hn::Load(d, r + L), acc1);
                    acc2 = hn::MulAdd(ai, hn::Load(d, r + 2 * L), acc2);
                    acc3 = hn::MulAdd(ai, hn::Load(d, r + 3 * L), acc3);
                }
                const bool fits = j0 + g + G <= T;
                float* dst = fits ? S_t + g : last;
                hn::StoreU(hn::Mul(acc0, vscale), d, dst);
                hn::StoreU(hn::Mul(acc1, vscale), d, dst + L);
                hn::StoreU(hn::Mul(acc2, vscale), d, dst + 2 * L);
                hn::StoreU(hn::Mul(acc3, vscale), d, dst + 3 * L);
                if (!fits) std::memcpy(S_t + g, last, sizeof(float) * size_t(cols - g));
            }
        }
    }
}

// y (hs) = scale · Σ_{j = j0}^{j1 - 1} w[j·ws] · x_j (written): a sum of rows x_j = x + j·ldx of
// x (j1, hs), weighted by entries j·ws of w. With ws = 1 the weights are a row of a (T, T)
// matrix (y = row · x: P·v, dS·k); with ws = T they are a column (y = columnᵀ · x: Pᵀ·dout,
// dSᵀ·q, read with stride T). hs is a multiple of the vector length (attention_fused_fits).
void WeightedRows(float* y, const float* w, size_t ws, const float* x, size_t ldx, int j0, int j1,
                  int hs, float scale) {
    const D d;
    const int L = int(hn::Lanes(d)), G = 4 * L;
    const V vscale = hn::Set(d, scale);
    int i0 = 0;
    for (; i0 + G <= hs; i0 += G) {
        V acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
        for (int j = j0; j < j1; j++) {
            const V wj = hn::Set(d, w[size_t(j) * ws]);
            const float* x_j = x + size_t(j) * ldx + i0;
            acc0 = hn::MulAdd(wj, hn::LoadU(d, x_j), acc0);
            acc1 = hn::MulAdd(wj, hn::LoadU(d, x_j + L), acc1);
            acc2 = hn::MulAdd(wj, hn::LoadU(d, x_j + 2 * L), acc2);
            acc3 = hn::MulAdd(wj, hn::LoadU(d, x_j + 3 * L), acc3);
        }
        hn::StoreU(hn::Mul(acc0, vscale), d, y + i0);
        hn::StoreU(hn::Mul(acc1, vscale), d, y + i0 + L);
        hn::StoreU(hn::Mul(acc2, vscale), d, y + i0 + 2 * L);
        hn::StoreU(hn::Mul(acc3, vscale), d, y + i0 + 3 * L);
    }
    for (; i0 < hs; i0 += L) {  // fewer than four vectors left
        V acc = hn::Zero(d);
        for (int j = j0; j < j1; j++)
            acc = hn::MulAdd(hn::Set(d, w[size_t(j) * ws]), hn::LoadU(d, x + size_t(j) * ldx + i0), acc);
        hn::StoreU(hn::Mul(acc, vscale), d, y + i0);
    }
}

// P_t (t + 1) = att_t (t + 1) with dropout applied: att_t itself without dropout, else written
// into `dropped` (t + 1) and returned.
const float* DroppedRow(float* dropped, const float* att_t, int t, Dropout drop, size_t row) {
    if (!drop.active()) return att_t;
    dropout_apply_kernel(dropped, att_t, size_t(t) + 1, drop, row);
    return dropped;
}

// out (T, hs) with row stride ldo; att (T, T); q, k, v (T, hs) with row stride ld.
void AttentionHeadForward(float* out, size_t ldo, float* att, const float* q, const float* k,
                          const float* v, size_t ld, int T, int hs, Dropout drop, size_t drop_base) {
    HWY_ALIGN float dropped[kFusedMaxT];
    // scores S = q·kᵀ/√hs on s ≤ t, then the softmax of each row's visible part; 0 above
    CausalRowDots(att, q, ld, k, ld, T, hs, 1.0f / std::sqrt(float(hs)));
    for (int t = 0; t < T; t++) {
        float* att_t = att + size_t(t) * T;
        softmax_row(att_t, att_t, size_t(t) + 1);
        std::memset(att_t + t + 1, 0, sizeof(float) * size_t(T - t - 1));
        // out_t = Σ_{s ≤ t} P[t,s] · v_s
        const float* P_t = DroppedRow(dropped, att_t, t, drop, drop_base + size_t(t) * T);
        WeightedRows(out + size_t(t) * ldo, P_t, 1, v, ld, 0, t + 1, hs, 1.0f);
    }
}

// One head's backward: dq, dk, dv (T, hs) with row stride ld, written; dS (T, T) working space;
// dout (T, hs) with row stride ldo; q, k, v (T, hs) with row stride ld; att (T, T) from the
// forward. The derivation's steps (attention.h, above attention_backward_twin), in the order that
// makes each step one pass over a (T, T) matrix held in L1:
//   step 1, dv    dv_s = Σ_{t ≥ s} P[t,s] · dout_t, first: column s of P as the weights (with
//                 dropout, P is formed in dS, which dP then overwrites)
//   step 1, dP    dS[t,s] = dout_t · v_s for s ≤ t: the row dots of the scores, on dout and v
//   per row t     step 2 (dA = dP · m / (1 − p)), step 3 (dS = the softmax's backward on att's
//                 row t), and step 4's dq_t = Σ_{s ≤ t} dS[t,s] · k_s / √hs, row t of dS as weights
//   step 4, dk    dk_s = Σ_{t ≥ s} dS[t,s] · q_t / √hs, last, once every row of dS is final: a
//                 strided loop down column s of dS
// Each sum runs in a fixed order (t ascending), so the bits do not depend on the thread count.
void AttentionHeadBackward(float* dq, float* dk, float* dv, float* dS, const float* dout,
                           size_t ldo, const float* q, const float* k, const float* v,
                           const float* att, size_t ld, int T, int hs, Dropout drop,
                           size_t drop_base) {
    const float scale = 1.0f / std::sqrt(float(hs));
    // step 1, dv: dv_s (hs) = Σ_{t ≥ s} P[t,s] · dout_t, column s of P (T, T) as the weights
    // (P = att without dropout; with it, P's rows go into dS first, which dP then overwrites)
    const float* P = att;
    if (drop.active()) {
        for (int t = 0; t < T; t++)
            DroppedRow(dS + size_t(t) * T, att + size_t(t) * T, t, drop, drop_base + size_t(t) * T);
        P = dS;
    }
    for (int s = 0; s < T; s++) WeightedRows(dv + size_t(s) * ld, P + s, T, dout, ldo, s, T, hs, 1.0f);
    // step 1, dP: dS (T, T) = dP[t,s] = dout_t · v_s, s ≤ t
    CausalRowDots(dS, dout, ldo, v, ld, T, hs, 1.0f);
    for (int t = 0; t < T; t++) {
        float* dS_t = dS + size_t(t) * T;
        const size_t row = drop_base + size_t(t) * T;
        if (drop.active()) dropout_apply_kernel(dS_t, dS_t, size_t(t) + 1, drop, row);  // step 2: dA = dP · m / (1 - p)
        softmax_backward_row(dS_t, att + size_t(t) * T, dS_t, size_t(t) + 1);  // step 3
        // step 4, dq: dq_t (hs) = Σ_{s ≤ t} dS[t,s] · k_s / √hs, row t of dS as the weights
        WeightedRows(dq + size_t(t) * ld, dS_t, 1, k, ld, 0, t + 1, hs, scale);
    }
    // step 4, dk: dk_s (hs) = Σ_{t ≥ s} dS[t,s] · q_t / √hs, column s of dS (stride T) as the weights
    for (int s = 0; s < T; s++) WeightedRows(dk + size_t(s) * ld, dS + s, T, q, ld, s, T, hs, scale);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(AttentionHeadForward);
HWY_EXPORT(AttentionHeadBackward);

void attention_head_forward(float* out, size_t ldo, float* att, const float* q, const float* k,
                            const float* v, size_t ld, int T, int hs, Dropout drop,
                            size_t drop_base) {
    HWY_DYNAMIC_DISPATCH(AttentionHeadForward)(out, ldo, att, q, k, v, ld, T, hs, drop, drop_base);
}
void attention_head_backward(float* dq, float* dk, float* dv, float* dS, const float* dout,
                             size_t ldo, const float* q, const float* k, const float* v,
                             const float* att, size_t ld, int T, int hs, Dropout drop,
                             size_t drop_base) {
    HWY_DYNAMIC_DISPATCH(AttentionHeadBackward)(dq, dk, dv, dS, dout, ldo, q, k, v, att, ld, T, hs,
                                                drop, drop_base);
}

}  // namespace hg
#endif
