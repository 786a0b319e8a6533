// attention.cpp — attention's float fast path (see attention.h): the choice between its two ways,
// the fused kernels of lib/kernels/attention_kernels.h and products on row blocks
// (attention_blocks.h), and each way's loop over the (b, h) pairs. The bf16 version is
// attention_bf16.cpp.
#include "lib/layers/attention.h"

#include <cmath>
#include <cstring>

#include "lib/core/errors.h"
#include "lib/kernels/attention_kernels.h"
#include "lib/kernels/dropout_kernels.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/softmax_kernels.h"
#include "lib/layers/attention_blocks.h"

namespace hg {

// The fused kernels run for small heads on short rows only: there they measured faster than the
// products, elsewhere (hs 64, or T 128 and more) the products' register blocking wins over the
// kernels' column-strided sums of dk and dv (docs/performance.md).
bool attention_uses_fused(int T, int hs) { return attention_fused_fits(T, hs) && hs <= 32 && T <= 64; }

void attention_forward(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                       int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    if (attention_uses_fused(T, C / NH))
        attention_forward_fused(out, att, scratch, qkv, B, T, C, NH, drop);
    else
        attention_forward_sgemm(out, att, scratch, qkv, B, T, C, NH, drop);
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    if (attention_uses_fused(T, C / NH))
        attention_backward_fused(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
    else
        attention_backward_sgemm(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
}

// ---- the fused way: one kernel call per (b, h), all heads in one parallel loop ----------------

// attention_check, and that the fused kernels take the shape; returns hs.
static int fused_check(int B, int T, int C, int NH, Dropout drop, const void* scratch, bool backward) {
    attention_check(B, T, C, NH, drop, scratch, backward);
    check(attention_fused_fits(T, C / NH), "attention: the fused kernels do not take T={}, hs={}", T, C / NH);
    return C / NH;
}

void attention_forward_fused(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                             int C, int NH, Dropout drop) {
    const int hs = fused_check(B, T, C, NH, drop, scratch, false);
    const size_t C3 = 3 * size_t(C);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const float* q = qkv + head_in_qkv(bh, T, C, NH);  // (T,hs), row stride 3C; k, v follow
        attention_head_forward(out + head_in_out(bh, T, C, NH), C, att + (size_t)bh * T * T, q, q + C,
                               q + 2 * (size_t)C, C3, T, hs, drop, (size_t)bh * T * T);
    }
}

void attention_backward_fused(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop) {
    const int hs = fused_check(B, T, C, NH, drop, scratch, true);
    const size_t C3 = 3 * size_t(C);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const size_t off = head_in_qkv(bh, T, C, NH);
        const float* q = qkv + off;  // (T,hs), row stride 3C; k, v follow
        float* dq = dqkv + off;      // the same for dq, dk, dv
        attention_head_backward(dq, dq + C, dq + 2 * (size_t)C, scratch + (size_t)bh * T * T,
                                dout + head_in_out(bh, T, C, NH), C, q, q + C, q + 2 * (size_t)C,
                                att + (size_t)bh * T * T, C3, T, hs, drop, (size_t)bh * T * T);
    }
}

// ---- the sgemm way: products on blocks of rows (attention_blocks.h) -------------------------
// A head's q, k, v are strided slices of qkv (T, hs) with row stride 3C, and its out (T, hs) a
// slice of out with row stride C: the products take them without copying.

void attention_forward_sgemm(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                             int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    for_each_row_block(B, NH, T, [&](int bh, int t0, int t1) {
        const int rows = t1 - t0;
        const float* q = qkv + head_in_qkv(bh, T, C, NH);  // (T,hs), row stride 3C
        const float* k = q + C;
        const float* v = q + 2 * (size_t)C;
        float* out_bh = out + head_in_out(bh, T, C, NH);  // (T,hs), row stride C
        float* att_bh = att + (size_t)bh * T * T;         // (T,T)
        float* att_blk = att_bh + (size_t)t0 * T;         // (rows, t1) of it used, row stride T
        // scores[t, s] = q_t · k_s / √hs for t in [t0, t1), s in [0, t1), then the softmax
        matmul_nt({att_blk, rows, t1, T}, {q + (size_t)t0 * C3, rows, hs, C3}, {k, t1, hs, C3}, scale, 0.0f);
        softmax_rows(att_bh, T, t0, t1);
        // out[t0:t1] = P · v[0:t1] with P = dropout(att) for these rows: att's own rows without
        // dropout (zero above the diagonal already), else a copy in this (b, h)'s slice of scratch
        Mat<const float> P{att_blk, rows, t1, T};
        if (drop.active()) {
            float* dropped = scratch + (size_t)bh * T * T;  // (rows, t1) used
            write_probabilities(dropped, t1, att_bh, T, t0, t1, drop, bh);
            P = {dropped, rows, t1, t1};
        }
        matmul_nn({out_bh + (size_t)t0 * C, rows, hs, C}, P, {v, t1, hs, C3}, 1.0f, 0.0f);
    });
}

// The derivation is in attention.h above attention_backward_twin; the step numbers are its
// steps. Per (b, h) and row block [t0, t1), one (rows, t1) block of scratch holds in turn P,
// then dP, then dA, then dS:
//   1. blk = P (att with dropout applied)             dv[0:t1] += blkᵀ · dout[t0:t1]
//   1. blk = dout[t0:t1] · v[0:t1]ᵀ                   (dP)
//   2. blk ⊙= m / (1 - p)                             (dA)
//   3. blk = att ⊙ (blk - Σ_s att ⊙ blk) per row      (dS; 0 for s > t: the mask)
//   4. dq[t0:t1] = blk · k[0:t1] / √hs,    dk[0:t1] += blkᵀ · q[t0:t1] / √hs
// Only entries s ≤ t of att are read. dk and dv are written by the first block done and added to
// by the others (for_each_row_block_backward, beta_kv).
void attention_backward_sgemm(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    for_each_row_block_backward(att, B, NH, T, [&](int bh, int t0, int t1, float beta_kv) {
        const int rows = t1 - t0;
        const size_t off = head_in_qkv(bh, T, C, NH);
        const float* q = qkv + off;  // (T,hs), row stride 3C
        const float* k = q + C;
        const float* v = q + 2 * (size_t)C;
        float* dq = dqkv + off;      // (T,hs), row stride 3C
        float* dk = dq + C;
        float* dv = dq + 2 * (size_t)C;
        const float* dout_blk = dout + head_in_out(bh, T, C, NH) + (size_t)t0 * C;  // (rows, hs), row stride C
        const float* att_bh = att + (size_t)bh * T * T;                             // (T,T)
        float* blk = scratch + (size_t)bh * T * T + (size_t)t0 * T;  // (rows, t1) used, row stride T
        const Mat<float> blk_m{blk, rows, t1, T};
        // step 1: blk = P, zero above the diagonal (att's own zeros there are not read);
        // dv[0:t1] += Pᵀ · dout[t0:t1]
        write_probabilities(blk, T, att_bh, T, t0, t1, drop, bh);
        matmul_tn({dv, t1, hs, C3}, blk_m, {dout_blk, rows, hs, C}, 1.0f, beta_kv);
        // step 1: blk = dP = dout[t0:t1] · v[0:t1]ᵀ
        matmul_nt(blk_m, {dout_blk, rows, hs, C}, {v, t1, hs, C3}, 1.0f, 0.0f);
        for (int t = t0; t < t1; t++) {
            const float* att_t = att_bh + (size_t)t * T;
            float* blk_t = blk + (size_t)(t - t0) * T;
            // step 2: dA = dP · m / (1 - p)
            if (drop.active()) dropout_apply_kernel(blk_t, blk_t, (size_t)t + 1, drop, ((size_t)bh * T + t) * T);
            // step 3: the softmax Jacobian on the visible s ≤ t; the masked rest gets none
            softmax_backward_row(blk_t, att_t, blk_t, (size_t)t + 1);
            std::memset(blk_t + t + 1, 0, sizeof(float) * (size_t)(t1 - t - 1));
        }
        // step 4: dq[t0:t1] = dS · k[0:t1] / √hs;  dk[0:t1] += dSᵀ · q[t0:t1] / √hs
        matmul_nn({dq + (size_t)t0 * C3, rows, hs, C3}, blk_m, {k, t1, hs, C3}, scale, 0.0f);
        matmul_tn({dk, t1, hs, C3}, blk_m, {q + (size_t)t0 * C3, rows, hs, C3}, scale, beta_kv);
    });
}

}  // namespace hg
