// attention_bf16.cpp — attention in mixed precision (the model's dtype bfloat16; attention.h):
// the sgemm way's row blocks (attention_blocks.h) with the six products on bf16 inputs and float
// sums and outputs (lib/kernels/matmul_bf16.h).
//   rounded to bf16   q, k and v (once per pass, for every head and row block), P = dropout(att)
//                     for out = P·v and for dv += Pᵀ·dout, dout, and dS for dq = dS·k and
//                     dk += dSᵀ·q;
//   kept in float     the scores and the softmax, att (the stored probabilities, which the
//                     backward's Jacobian reads and P is formed from again), dP and the
//                     softmax's backward. The scores leave the product in float: e^(s+δ) =
//                     e^s·(1 + δ + …), so an absolute error δ in a score is a relative error δ in
//                     its probability, and rounding a score of size |s| to bf16 would add δ up to
//                     2⁻⁹·|s| on top of the inputs' rounding (1.6 % of a probability at |s| = 8).
//                     The softmax's backward subtracts Σ_s A·dA from dA, a difference of
//                     near-equal numbers wherever a row's gradient is nearly uniform, so dP
//                     reaches it in float and only its result dS is rounded.
// The bound this gives on out and dqkv, entry by entry, is derived in tests/test_attention_bf16.cpp.
#include <cmath>
#include <cstring>

#include "lib/core/errors.h"
#include "lib/kernels/dropout_kernels.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/softmax_kernels.h"
#include "lib/layers/attention.h"
#include "lib/layers/attention_blocks.h"

namespace hg {

// The bf16 working space, scratch16: the layer's qkv rounded, (B·T, 3C) in qkv's own layout,
// then dout rounded, (B·T, C) in dout's (the backward's), then two row blocks per (b, h), (rows,
// t1) with row stride t1: P (the forward's, and the backward's), and dS (the backward's). q, k, v
// and dout are rounded in one pass over the whole layer, front to back, before the heads start:
// rounded head by head, whose rows lie 3C apart, every row would be a new page for the memory
// system to find (docs/performance.md).
struct Head16 {
    const bf16 *q, *k, *v, *dout;  // (T, hs) each, row strides 3C, 3C, 3C, C
    bf16* blk;                     // P, then dS: (kRowBlock, T) numbers each
};
static size_t layer_numbers(int B, int T, int C) { return 4 * size_t(B) * T * C; }
static Head16 head16(bf16* scratch16, int bh, int B, int T, int C, int NH) {
    const bf16* q = scratch16 + head_in_qkv(bh, T, C, NH);
    const bf16* dout = scratch16 + 3 * size_t(B) * T * C + head_in_out(bh, T, C, NH);
    return {q, q + C, q + 2 * (size_t)C, dout, scratch16 + layer_numbers(B, T, C) + (size_t)bh * 2 * kRowBlock * T};
}

size_t attention_bf16_scratch(int B, int T, int C, int NH) {
    check(B > 0 && T > 0 && NH > 0 && C > 0 && C % NH == 0, "attention: bad sizes B={} T={} C={} NH={}", B, T, C, NH);
    return layer_numbers(B, T, C) + size_t(B) * NH * 2 * kRowBlock * T;
}

// out (rows, cols), row stride ldo = the float rows of in, row stride ldi, rounded (bf16.h).
static void round_rows(bf16* out, int ldo, const float* in, int ldi, int rows, int cols) {
    for (int r = 0; r < rows; r++) bf16_round(out + size_t(r) * ldo, in + size_t(r) * ldi, size_t(cols));
}

// The forward of attention_forward_sgemm (attention.cpp), its two products on bf16 copies: P is
// rounded into the head's bf16 block, and each block's rows of out into out16 once final.
void attention_forward_bf16(float* out, bf16* out16, float* att, float* scratch, bf16* scratch16, const float* qkv,
                            int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    check(scratch16 != nullptr, "attention: the bf16 forward needs scratch16");
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    bf16_round_parallel(scratch16, qkv, size_t(B) * T * C3);  // q, k, v rounded
    for_each_row_block(B, NH, T, [&](int bh, int t0, int t1) {
        const int rows = t1 - t0;
        const Head16 h16 = head16(scratch16, bh, B, T, C, NH);
        float* out_blk = out + head_in_out(bh, T, C, NH) + (size_t)t0 * C;  // (rows, hs), row stride C
        float* att_bh = att + (size_t)bh * T * T;
        matmul_bf16_nt({att_bh + (size_t)t0 * T, rows, t1, T}, {h16.q + (size_t)t0 * C3, rows, hs, C3},
                       {h16.k, t1, hs, C3}, scale, 0.0f);
        softmax_rows(att_bh, T, t0, t1);
        write_probabilities(h16.blk, t1, att_bh, T, t0, t1, drop, bh);
        matmul_bf16_nn({out_blk, rows, hs, C}, {h16.blk, rows, t1, t1}, {h16.v, t1, hs, C3}, 1.0f, 0.0f);
        if (out16) round_rows(out16 + (out_blk - out), C, out_blk, C, rows, hs);  // these rows are final
    });
}

// The backward of attention_backward_sgemm (attention.cpp), with its steps in the order that
// lets one pass over each row do steps 1 to 3 while the row is in cache:
//   blk = dP = dout[t0:t1] · v[0:t1]ᵀ                        (float, from bf16 inputs)
//   per row t, s ≤ t, one dropout hash per entry for both:
//     P = dropout(att) rounded into P16;  blk = dA = dropout(dP);  blk = dS (the softmax's
//     backward on att's row, in float);  dS rounded into dS16; both zero for t < s < t1
//   dv[0:t1] += P16ᵀ · dout[t0:t1],  dq[t0:t1] = dS16 · k[0:t1] / √hs,  dk[0:t1] += dS16ᵀ · q[t0:t1] / √hs
// blk (rows, t1) with row stride T; P16 and dS16 are the head's two bf16 blocks, row stride t1.
void attention_backward_bf16(float* dqkv, bf16* dqkv16, float* scratch, bf16* scratch16, const float* dout,
                             const float* qkv, const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    check(scratch16 != nullptr, "attention: the bf16 backward needs scratch16");
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    bf16_round_parallel(scratch16, qkv, size_t(B) * T * C3);  // q, k, v rounded again (not kept), and dout
    bf16_round_parallel(scratch16 + size_t(B) * T * C3, dout, size_t(B) * T * C);
    for_each_row_block_backward(att, B, NH, T, [&](int bh, int t0, int t1, float beta_kv) {
        const int rows = t1 - t0;
        const Head16 h16 = head16(scratch16, bh, B, T, C, NH);
        float* dq = dqkv + head_in_qkv(bh, T, C, NH);  // (T,hs), row stride 3C
        float* dk = dq + C;
        float* dv = dq + 2 * (size_t)C;
        const float* att_bh = att + (size_t)bh * T * T;
        float* blk = scratch + (size_t)bh * T * T + (size_t)t0 * T;
        bf16 *P16 = h16.blk, *dS16 = h16.blk + (size_t)kRowBlock * T;
        const bf16* dout16 = h16.dout + (size_t)t0 * C;  // dout[t0:t1], row stride C
        matmul_bf16_nt({blk, rows, t1, T}, {dout16, rows, hs, C}, {h16.v, t1, hs, C3}, 1.0f, 0.0f);
        constexpr size_t kChunk = 256;
        float dropped[kChunk];
        for (int t = t0; t < t1; t++) {
            const float* att_t = att_bh + (size_t)t * T;
            float* blk_t = blk + (size_t)(t - t0) * T;
            bf16 *P_t = P16 + (size_t)(t - t0) * t1, *dS_t = dS16 + (size_t)(t - t0) * t1;
            const size_t visible = (size_t)t + 1, row = ((size_t)bh * T + t) * T;  // dropout index of (t, 0)
            for (size_t s0 = 0; s0 < visible; s0 += kChunk) {
                const size_t n = std::min(kChunk, visible - s0);
                if (drop.active()) {
                    dropout_apply2_kernel(dropped, att_t + s0, blk_t + s0, blk_t + s0, n, drop, row + s0);
                    bf16_round(P_t + s0, dropped, n);
                } else {
                    bf16_round(P_t + s0, att_t + s0, n);
                }
            }
            softmax_backward_row(blk_t, att_t, blk_t, visible);
            bf16_round(dS_t, blk_t, visible);
            std::memset(P_t + visible, 0, sizeof(bf16) * (size_t)(t1 - visible));
            std::memset(dS_t + visible, 0, sizeof(bf16) * (size_t)(t1 - visible));
        }
        matmul_bf16_tn({dv, t1, hs, C3}, {P16, rows, t1, t1}, {dout16, rows, hs, C}, 1.0f, beta_kv);
        matmul_bf16_nn({dq + (size_t)t0 * C3, rows, hs, C3}, {dS16, rows, t1, t1}, {h16.k, t1, hs, C3}, scale, 0.0f);
        matmul_bf16_tn({dk, t1, hs, C3}, {dS16, rows, t1, t1}, {h16.q + (size_t)t0 * C3, rows, hs, C3}, scale,
                       beta_kv);
        if (dqkv16 && t0 == 0)  // the head's last block: its dq, dk, dv are final
            for (float* d : {dq, dk, dv}) round_rows(dqkv16 + (d - dqkv), C3, d, C3, T, hs);
    });
}

}  // namespace hg
