// attention.cpp — causal multi-head attention, all (b, h) pairs in one parallel loop, by one of
// two paths (attention.h says which runs when): the fused kernels of
// lib/kernels/attention_kernels.h, or sgemm calls on blocks of rows (below).
//
// The sgemm path. Each (b, h) is one task: its q, k, v are strided slices of qkv (row stride 3C), so they go
// to sgemm without copying. OpenBLAS (the OpenMP build) runs single-threaded inside our
// parallel region, which is what we want: the parallelism is over heads.
//
// Skipping the masked upper triangle: rows are taken in blocks [t0, t1) of kRowBlock, and a
// block only needs keys/values 0 .. t1-1 (row t sees s ≤ t < t1). So each sgemm is
// (rows × t1) instead of (rows × T), about half the work of the full square for long T; only
// the small diagonal block computes some masked entries, which the softmax then ignores.
//
// Every (b, h) is done by one thread in a fixed order, so the result does not depend on the
// number of threads.
#include "lib/layers/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lib/core/errors.h"
#include "lib/kernels/attention_kernels.h"
#include "lib/kernels/dropout_kernels.h"
#include "lib/kernels/matmul.h"
#include "lib/kernels/matmul_bf16.h"
#include "lib/kernels/softmax_kernels.h"

namespace hg {

constexpr int kRowBlock = 64;  // rows of scores per sgemm block

// The bf16 working space, scratch16: the layer's qkv rounded, (B·T, 3C) in qkv's own layout,
// then dout rounded, (B·T, C) in dout's (the backward's), then two row blocks per (b, h), (rows,
// t1) with row stride t1: P (the forward's, and the backward's), and dS (the backward's). q, k, v
// and dout are rounded in one pass over the whole layer, front to back, before the heads start:
// rounded head by head, whose rows lie 3C apart, every row was a new page for the memory system
// to find (measured on attention alone at one replica's share of the baby GPT, one thread,
// forward + backward: 333–354 → 296 ms a step). The float path has none (all null).
struct Head16 {
    const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // row strides 3C, 3C, 3C, C
    bf16* blk = nullptr;
};
static size_t layer_numbers(int B, int T, int C) { return 4 * size_t(B) * T * C; }
static Head16 head16(bf16* scratch16, int bh, int B, int T, int C, int NH) {
    if (!scratch16) return {};
    const int b = bh / NH, h = bh % NH, hs = C / NH;
    const bf16* q = scratch16 + (size_t)b * T * 3 * C + (size_t)h * hs;
    const bf16* dout = scratch16 + 3 * size_t(B) * T * C + (size_t)b * T * C + (size_t)h * hs;
    return {q, q + C, q + 2 * (size_t)C, dout, scratch16 + layer_numbers(B, T, C) + (size_t)bh * 2 * kRowBlock * T};
}
// out (rows, cols), row stride ldo = the float rows of in, row stride ldi, rounded (bf16.h).
static void round_rows(bf16* out, int ldo, const float* in, int ldi, int rows, int cols) {
    for (int r = 0; r < rows; r++) bf16_round(out + size_t(r) * ldo, in + size_t(r) * ldi, size_t(cols));
}
// The rows [t0, t1) of P = dropout(att) into blk (rows, t1), row stride ldb, as float or rounded
// to bf16: row t has its visible s ≤ t from att_bh (row stride T), dropped where the mask says,
// and +0 above the diagonal. att itself keeps the probabilities before dropout (the backward
// reads them). One pass: rounded, the dropped probabilities go through a small float buffer on
// the stack, never a (rows, t1) float block.
static void put(float* out, const float* in, size_t n) { std::memcpy(out, in, sizeof(float) * n); }
static void put(bf16* out, const float* in, size_t n) { bf16_round(out, in, n); }
template <typename Out>
static void write_probabilities(Out* blk, size_t ldb, const float* att_bh, int T, int t0, int t1, Dropout drop,
                                int bh) {
    constexpr size_t kChunk = 256;
    float dropped[kChunk];
    for (int t = t0; t < t1; t++) {
        const float* att_t = att_bh + (size_t)t * T;
        Out* out = blk + (size_t)(t - t0) * ldb;
        const size_t visible = (size_t)t + 1, row = ((size_t)bh * T + t) * T;  // dropout index of (t, 0)
        for (size_t s0 = 0; s0 < visible; s0 += kChunk) {
            const size_t n = std::min(kChunk, visible - s0);
            if (!drop.active()) {
                put(out + s0, att_t + s0, n);
            } else if constexpr (std::is_same_v<Out, float>) {
                dropout_apply_kernel(out + s0, att_t + s0, n, drop, row + s0);
            } else {
                dropout_apply_kernel(dropped, att_t + s0, n, drop, row + s0);
                put(out + s0, dropped, n);
            }
        }
        std::memset(out + visible, 0, sizeof(Out) * (size_t)(t1 - t - 1));
    }
}

// Asks for the visible part of att's rows [t0, t1) to come into the cache (L2) ahead of use. The
// backward reads att long after the forward wrote it, from memory: fetched while the current
// block's products run, the next block's rows are there when it starts. Measured on the baby
// GPT (B 64, both batch threads, 2026-12-03): attention's backward 205–216 → 188–190 ms a step in
// bf16; in float, on one replica's share alone, 3 % faster. Writes are not prefetched: asking
// for the forward's next block measured slower.
static void prefetch_rows(const float* att_bh, int T, int t0, int t1) {
    constexpr int kLine = 64 / sizeof(float);  // floats per cache line
    for (int t = t0; t < t1; t++)
        for (int s = 0; s <= t; s += kLine) __builtin_prefetch(att_bh + (size_t)t * T + s, 0, 2);
}

// The forward of the sgemm path; kBf16 runs its two products on bf16 copies (attention.h).
template <bool kBf16>
static void forward_blocks(float* out, bf16* out16, float* att, float* scratch, bf16* scratch16, const float* qkv,
                           int B, int T, int C, int NH, Dropout drop) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    if constexpr (kBf16) bf16_round_parallel(scratch16, qkv, size_t(B) * T * C3);  // q, k, v rounded
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const float* q = qkv + (size_t)b * T * C3 + (size_t)h * hs;  // (T,hs), row stride 3C
        const float* k = q + C;                                       // (T,hs), row stride 3C
        const float* v = q + 2 * (size_t)C;                           // (T,hs), row stride 3C
        float* att_bh = att + (size_t)bh * T * T;                     // (T,T)
        float* out_bh = out + (size_t)b * T * C + (size_t)h * hs;     // (T,hs), row stride C
        const Head16 h16 = head16(scratch16, bh, B, T, C, NH);
        for (int t0 = 0; t0 < T; t0 += kRowBlock) {
            const int t1 = std::min(T, t0 + kRowBlock), rows = t1 - t0;
            float* att_blk = att_bh + (size_t)t0 * T;  // (rows, t1) of it used, row stride T
            // scores[t, s] = q_t · k_s / √hs for t in [t0, t1), s in [0, t1); float out of either
            if constexpr (kBf16)
                matmul_bf16_nt({att_blk, rows, t1, T}, {h16.q + (size_t)t0 * C3, rows, hs, C3}, {h16.k, t1, hs, C3}, scale, 0.0f);
            else
                matmul_nt({att_blk, rows, t1, T}, {q + (size_t)t0 * C3, rows, hs, C3}, {k, t1, hs, C3}, scale, 0.0f);
            // softmax over the visible part s ≤ t; the masked part s > t is probability 0
            for (int t = t0; t < t1; t++) {
                float* att_t = att_bh + (size_t)t * T;
                softmax_row(att_t, att_t, (size_t)t + 1);
                std::memset(att_t + t + 1, 0, sizeof(float) * (size_t)(T - t - 1));
            }
            // out[t0:t1] = P · v[0:t1]   (rows, t1)·(t1, hs), into head h's columns of out, with
            // P = dropout(att) for these rows: rounded into the bf16 block; in float, att's own
            // rows without dropout (zero above the diagonal already), else a copy in this
            // (b, h)'s slice of scratch.
            if constexpr (kBf16) {
                write_probabilities(h16.blk, t1, att_bh, T, t0, t1, drop, bh);
                matmul_bf16_nn({out_bh + (size_t)t0 * C, rows, hs, C}, {h16.blk, rows, t1, t1}, {h16.v, t1, hs, C3}, 1.0f, 0.0f);
                if (out16)  // these rows of head h's out are final
                    round_rows(out16 + (out_bh - out) + (size_t)t0 * C, C, out_bh + (size_t)t0 * C, C, rows, hs);
            } else if (drop.active()) {
                float* P = scratch + (size_t)bh * T * T;  // (rows, t1) used
                write_probabilities(P, t1, att_bh, T, t0, t1, drop, bh);
                matmul_nn({out_bh + (size_t)t0 * C, rows, hs, C}, {P, rows, t1, t1}, {v, t1, hs, C3}, 1.0f, 0.0f);
            } else {
                matmul_nn({out_bh + (size_t)t0 * C, rows, hs, C}, {att_blk, rows, t1, T}, {v, t1, hs, C3}, 1.0f, 0.0f);
            }
        }
    }
}

void attention_forward_sgemm(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                             int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    forward_blocks<false>(out, nullptr, att, scratch, nullptr, qkv, B, T, C, NH, drop);
}

// One row block [t0, t1) of the bf16 backward: the steps of backward_blocks (below), in the
// order that lets one pass over each row do steps 1 to 3 while the row is in cache:
//   blk = dP = dout[t0:t1] · v[0:t1]ᵀ                        (float, from bf16 inputs)
//   per row t, s ≤ t, one dropout hash per entry for both:
//     P = dropout(att) rounded into P16;  blk = dA = dropout(dP);  blk = dS (the softmax's
//     backward on att's row, in float);  dS rounded into dS16; both zero for t < s < t1
//   dv[0:t1] += P16ᵀ · dout[t0:t1],  dq[t0:t1] = dS16 · k[0:t1] / √hs,  dk[0:t1] += dS16ᵀ · q[t0:t1] / √hs
// blk (rows, t1) with row stride T; P16 and dS16 are h16's two blocks, row stride t1.
static void backward_block16(float* dq, float* dk, float* dv, float* blk, const Head16& h16, const float* att_bh,
                             int T, int C, int hs, int t0, int t1, float beta_kv, float scale, Dropout drop, int bh) {
    const int C3 = 3 * C, rows = t1 - t0;
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
    matmul_bf16_tn({dk, t1, hs, C3}, {dS16, rows, t1, t1}, {h16.q + (size_t)t0 * C3, rows, hs, C3}, scale, beta_kv);
}

// Backward: the derivation is in attention.h above attention_backward_twin; the step
// numbers below are its steps. Per (b, h) and row block [t0, t1), one (rows, t1) block of
// scratch holds in turn P, then dP, then dA, then dS:
//   1. blk = P (att with dropout applied)             dv[0:t1] += blkᵀ · dout[t0:t1]
//   1. blk = dout[t0:t1] · v[0:t1]ᵀ                   (dP)
//   2. blk ⊙= m / (1 - p)                             (dA)
//   3. blk = att ⊙ (blk - Σ_s att ⊙ blk) per row      (dS; 0 for s > t: the mask)
//   4. dq[t0:t1] = blk · k[0:t1] / √hs,    dk[0:t1] += blkᵀ · q[t0:t1] / √hs
// Only entries s ≤ t of att are read. dqkv is written, not added to (layers.h): each row block
// writes its own rows of dq, and the blocks run last to first, so the first one done (the last
// rows, whose keys are all of 0..T-1) writes dk and dv (beta = 0) and the earlier ones add.
// kBf16: the same steps in another order, backward_block16 (above), for each row block.
template <bool kBf16>
static void backward_blocks(float* dqkv, bf16* dqkv16, float* scratch, bf16* scratch16, const float* dout,
                            const float* qkv, const float* att, int B, int T, int C, int NH, Dropout drop) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    if constexpr (kBf16) {  // q, k, v rounded again (not kept from the forward), and dout
        bf16_round_parallel(scratch16, qkv, size_t(B) * T * C3);
        bf16_round_parallel(scratch16 + size_t(B) * T * C3, dout, size_t(B) * T * C);
    }
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const size_t off = (size_t)b * T * C3 + (size_t)h * hs;  // head h's q in qkv
        const float* q = qkv + off;                              // (T,hs), row stride 3C
        const float* k = q + C;
        const float* v = q + 2 * (size_t)C;
        float* dq = dqkv + off;                                  // (T,hs), row stride 3C
        float* dk = dq + C;
        float* dv = dq + 2 * (size_t)C;
        const float* dout_bh = dout + (size_t)b * T * C + (size_t)h * hs;  // (T,hs), stride C
        const float* att_bh = att + (size_t)bh * T * T;                    // (T,T)
        float* scratch_bh = scratch + (size_t)bh * T * T;                  // (T,T)
        const Head16 h16 = head16(scratch16, bh, B, T, C, NH);
        const int last_t0 = (T - 1) / kRowBlock * kRowBlock;
        for (int t0 = last_t0; t0 >= 0; t0 -= kRowBlock) {
            const int t1 = std::min(T, t0 + kRowBlock), rows = t1 - t0;
            const float beta_kv = t0 == last_t0 ? 0.0f : 1.0f;  // dk, dv: write, then add
            assert(beta_kv == 1.0f || t1 == T);  // the block that writes covers every key 0..T-1
            float* blk = scratch_bh + (size_t)t0 * T;  // (rows, t1) of it used, row stride T
            const float* dout_blk = dout_bh + (size_t)t0 * C;
            if (t0 > 0)  // the next block's att rows: this head's, or the next head's first (its last rows)
                prefetch_rows(att_bh, T, t0 - kRowBlock, t0);
            else if (bh + 1 < B * NH)
                prefetch_rows(att_bh + (size_t)T * T, T, last_t0, T);
            if constexpr (kBf16) {
                backward_block16(dq, dk, dv, blk, h16, att_bh, T, C, hs, t0, t1, beta_kv, scale, drop, bh);
                continue;
            }
            // step 1: blk = P, zero above the diagonal (att's own zeros there are not read);
            // dv[0:t1] += Pᵀ · dout[t0:t1]
            write_probabilities(blk, T, att_bh, T, t0, t1, drop, bh);
            matmul_tn({dv, t1, hs, C3}, {blk, rows, t1, T}, {dout_blk, rows, hs, C}, 1.0f, beta_kv);
            // step 1: blk = dP = dout[t0:t1] · v[0:t1]ᵀ
            matmul_nt({blk, rows, t1, T}, {dout_blk, rows, hs, C}, {v, t1, hs, C3}, 1.0f, 0.0f);
            for (int t = t0; t < t1; t++) {
                const float* att_t = att_bh + (size_t)t * T;
                float* blk_t = blk + (size_t)(t - t0) * T;
                // step 2: dA = dP · m / (1 - p)
                if (drop.active())
                    dropout_apply_kernel(blk_t, blk_t, (size_t)t + 1, drop, ((size_t)bh * T + t) * T);
                // step 3: the softmax Jacobian on the visible s ≤ t; the masked rest gets none
                softmax_backward_row(blk_t, att_t, blk_t, (size_t)t + 1);
                std::memset(blk_t + t + 1, 0, sizeof(float) * (size_t)(t1 - t - 1));
            }
            // step 4: dq[t0:t1] = dS · k[0:t1] / √hs;  dk[0:t1] += dSᵀ · q[t0:t1] / √hs
            matmul_nn({dq + (size_t)t0 * C3, rows, hs, C3}, {blk, rows, t1, T}, {k, t1, hs, C3}, scale, 0.0f);
            matmul_tn({dk, t1, hs, C3}, {blk, rows, t1, T}, {q + (size_t)t0 * C3, rows, hs, C3}, scale, beta_kv);
        }
        if (dqkv16)  // head h's dq, dk, dv are final
            for (float* d : {dq, dk, dv}) round_rows(dqkv16 + (d - dqkv), C3, d, C3, T, hs);
    }
}

void attention_backward_sgemm(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    backward_blocks<false>(dqkv, nullptr, scratch, nullptr, dout, qkv, att, B, T, C, NH, drop);
}

// The fused path: one kernel call per (b, h), in the same parallel loop.

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
        const int b = bh / NH, h = bh % NH;
        const float* q = qkv + (size_t)b * T * C3 + (size_t)h * hs;  // (T,hs), row stride 3C
        attention_head_forward(out + (size_t)b * T * C + (size_t)h * hs, C, att + (size_t)bh * T * T, q,
                               q + C, q + 2 * (size_t)C, C3, T, hs, drop, (size_t)bh * T * T);
    }
}

void attention_backward_fused(float* dqkv, float* scratch, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH, Dropout drop) {
    const int hs = fused_check(B, T, C, NH, drop, scratch, true);
    const size_t C3 = 3 * size_t(C);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const size_t off = (size_t)b * T * C3 + (size_t)h * hs;  // head h's q in qkv
        const float* q = qkv + off;
        float* dq = dqkv + off;
        attention_head_backward(dq, dq + C, dq + 2 * (size_t)C, scratch + (size_t)bh * T * T,
                                dout + (size_t)b * T * C + (size_t)h * hs, C, q, q + C, q + 2 * (size_t)C,
                                att + (size_t)bh * T * T, C3, T, hs, drop, (size_t)bh * T * T);
    }
}

// Which path is faster, measured per (b, h) on one thread (forward + backward, fused time over
// sgemm time, best of many calls): hs 32, T 64 (the course model) 0.98 forward, 0.6–0.8
// backward, 0.63 forward with dropout (no dropped copy); hs 16, T 64 even; but hs 32 at T 128
// 1.1–1.2 and at T 256 1.1–1.6, hs 64 at T 64 1.3–1.8 and at T 256 1.4–1.5, T 1024 2.0: there the
// column-strided sums of dk and dv and sgemm's better register blocking win. So the fused
// kernels run for small heads on short rows only.
bool attention_uses_fused(int T, int hs) { return attention_fused_fits(T, hs) && hs <= 32 && T <= 64; }

void attention_forward(float* out, float* att, float* scratch, const float* qkv, int B, int T,
                       int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    (attention_uses_fused(T, C / NH) ? attention_forward_fused : attention_forward_sgemm)(
        out, att, scratch, qkv, B, T, C, NH, drop);
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    (attention_uses_fused(T, C / NH) ? attention_backward_fused : attention_backward_sgemm)(
        dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
}

// ---- bf16 (attention.h) ----------------------------------------------------------------------
// bf16 runs the sgemm path at every shape; the fused kernels have no bf16 version. Measured per
// call on one thread (best of 400, forward + backward, 2026-12-03, Zen 5 with AVX512_BF16), at the
// course model's shape (B 12, T 64, hs 32, where the float path runs fused) the bf16 sgemm path
// takes 0.72 ms against the float fused kernels' 0.84 without dropout, and 0.94 against 1.11 with
// dropout 0.2; at the baby GPT's (B 2, T 256, hs 64) 2.0 ms against the float sgemm path's 4.0.
size_t attention_bf16_scratch(int B, int T, int C, int NH) {
    check(B > 0 && T > 0 && NH > 0 && C > 0 && C % NH == 0, "attention: bad sizes B={} T={} C={} NH={}", B, T, C, NH);
    return layer_numbers(B, T, C) + size_t(B) * NH * 2 * kRowBlock * T;
}

void attention_forward_bf16(float* out, bf16* out16, float* att, float* scratch, bf16* scratch16, const float* qkv,
                            int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, false);
    check(scratch16 != nullptr, "attention: the bf16 forward needs scratch16");
    forward_blocks<true>(out, out16, att, scratch, scratch16, qkv, B, T, C, NH, drop);
}

void attention_backward_bf16(float* dqkv, bf16* dqkv16, float* scratch, bf16* scratch16, const float* dout,
                             const float* qkv, const float* att, int B, int T, int C, int NH, Dropout drop) {
    attention_check(B, T, C, NH, drop, scratch, true);
    check(scratch16 != nullptr, "attention: the bf16 backward needs scratch16");
    backward_blocks<true>(dqkv, dqkv16, scratch, scratch16, dout, qkv, att, B, T, C, NH, drop);
}

}  // namespace hg
