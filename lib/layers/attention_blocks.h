// attention_blocks.h — the row blocks of attention's sgemm path, shared by its float version
// (attention.cpp) and its bf16 version (attention_bf16.cpp): where a head's slices start, the
// loops over heads and row blocks, and the pieces of a block both versions do the same way.
//
// Skipping the masked upper triangle: a head's rows are taken in blocks [t0, t1) of kRowBlock,
// and a block only needs keys/values 0 .. t1-1 (row t sees s ≤ t < t1). So each product is
// (rows × t1) instead of (rows × T), about half the work of the full square for long T; only
// the small diagonal block computes some masked entries, which the softmax then ignores.
//
// Every (b, h) is done by one thread, its blocks in a fixed order, so the result does not
// depend on the number of threads. Inside the parallel loop each product runs single-threaded
// (lib/kernels/matmul.h): the parallelism is over heads.
#pragma once
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "lib/kernels/bf16.h"
#include "lib/kernels/dropout_kernels.h"
#include "lib/kernels/softmax_kernels.h"

namespace hg {

constexpr int kRowBlock = 64;  // query rows per block

// Where head (b, h) = (bh / NH, bh % NH) starts: its q in a (B·T, 3C) buffer (qkv, dqkv; its k
// and v are C and 2C further on, each (T, hs) with row stride 3C), and its (T, hs) slice of a
// (B·T, C) buffer (out, dout; row stride C). Its att is the (T, T) block at bh·T·T.
inline size_t head_in_qkv(int bh, int T, int C, int NH) {
    return size_t(bh / NH) * T * 3 * C + size_t(bh % NH) * (C / NH);
}
inline size_t head_in_out(int bh, int T, int C, int NH) {
    return size_t(bh / NH) * T * C + size_t(bh % NH) * (C / NH);
}

// The forward's order: block(bh, t0, t1) for every head, in parallel, its row blocks first to last.
template <typename Block>
void for_each_row_block(int B, int NH, int T, Block&& block) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int bh = 0; bh < B * NH; bh++)
        for (int t0 = 0; t0 < T; t0 += kRowBlock) block(bh, t0, std::min(T, t0 + kRowBlock));
}

// Asks for the visible part of att's rows [t0, t1) to come into the cache (L2) ahead of use:
// the backward reads att long after the forward wrote it, from memory (docs/performance.md).
inline void prefetch_rows(const float* att_bh, int T, int t0, int t1) {
    constexpr int kLine = 64 / sizeof(float);  // floats per cache line
    for (int t = t0; t < t1; t++)
        for (int s = 0; s <= t; s += kLine) __builtin_prefetch(att_bh + (size_t)t * T + s, 0, 2);
}

// The backward's order: block(bh, t0, t1, beta_kv) for every head, in parallel, its row blocks
// last to first. dqkv is written, not added to (layers.h): each block writes its own rows of dq,
// and the first block done (the last rows, whose keys are all of 0..T-1) writes dk and dv
// (beta_kv = 0), the earlier ones add (1). While a block runs, the next block's att rows (this
// head's, or the next head's last) are on their way into the cache.
template <typename Block>
void for_each_row_block_backward(const float* att, int B, int NH, int T, Block&& block) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int bh = 0; bh < B * NH; bh++) {
        const float* att_bh = att + (size_t)bh * T * T;
        const int last_t0 = (T - 1) / kRowBlock * kRowBlock;
        for (int t0 = last_t0; t0 >= 0; t0 -= kRowBlock) {
            const int t1 = std::min(T, t0 + kRowBlock);
            const float beta_kv = t0 == last_t0 ? 0.0f : 1.0f;
            assert(beta_kv == 1.0f || t1 == T);  // the block that writes covers every key 0..T-1
            if (t0 > 0)
                prefetch_rows(att_bh, T, t0 - kRowBlock, t0);
            else if (bh + 1 < B * NH)
                prefetch_rows(att_bh + (size_t)T * T, T, last_t0, T);
            block(bh, t0, t1, beta_kv);
        }
    }
}

// att's rows [t0, t1) (row stride T) from scores to probabilities: the softmax over the visible
// part s ≤ t, and 0 for the masked part s > t.
inline void softmax_rows(float* att_bh, int T, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        float* att_t = att_bh + (size_t)t * T;
        softmax_row(att_t, att_t, (size_t)t + 1);
        std::memset(att_t + t + 1, 0, sizeof(float) * (size_t)(T - t - 1));
    }
}

// The rows [t0, t1) of P = dropout(att) into blk (rows, t1), row stride ldb, as float or rounded
// to bf16: row t has its visible s ≤ t from att_bh (row stride T), dropped where the mask says,
// and +0 above the diagonal. att itself keeps the probabilities before dropout (the backward
// reads them). One pass: rounded, the dropped probabilities go through a small float buffer on
// the stack, never a (rows, t1) float block.
inline void copy_or_round(float* out, const float* in, size_t n) { std::memcpy(out, in, sizeof(float) * n); }
inline void copy_or_round(bf16* out, const float* in, size_t n) { bf16_round(out, in, n); }
template <typename Out>
void write_probabilities(Out* blk, size_t ldb, const float* att_bh, int T, int t0, int t1, Dropout drop, int bh) {
    constexpr size_t kChunk = 256;
    float dropped[kChunk];
    for (int t = t0; t < t1; t++) {
        const float* att_t = att_bh + (size_t)t * T;
        Out* out = blk + (size_t)(t - t0) * ldb;
        const size_t visible = (size_t)t + 1, row = ((size_t)bh * T + t) * T;  // dropout index of (t, 0)
        for (size_t s0 = 0; s0 < visible; s0 += kChunk) {
            const size_t n = std::min(kChunk, visible - s0);
            if (!drop.active()) {
                copy_or_round(out + s0, att_t + s0, n);
            } else if constexpr (std::is_same_v<Out, float>) {
                dropout_apply_kernel(out + s0, att_t + s0, n, drop, row + s0);
            } else {
                dropout_apply_kernel(dropped, att_t + s0, n, drop, row + s0);
                copy_or_round(out + s0, dropped, n);
            }
        }
        std::memset(out + visible, 0, sizeof(Out) * (size_t)(t1 - t - 1));
    }
}

}  // namespace hg
