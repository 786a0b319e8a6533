// flash_attention.cpp — the flash layer (flash_attention.h): one (b, h) pair is one piece of parallel
// work, run whole by the Highway kernels of lib/kernels/flash_attention_kernels.h in its thread's
// slice of scratch. A pair's result depends only on its own inputs and on the order the kernels
// take its tiles in, never on which thread ran it or what the slice held before, so the bits do
// not depend on the number of threads.
#include "lib/layers/flash_attention.h"

#include <algorithm>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/kernels/flash_attention_kernels.h"

namespace hg {

size_t flash_attention_scratch(int T, int C, int NH) {
    return flash_head_scratch(T, flash_attention_check(1, T, C, NH, Dropout{}), FlashProducts::Float);
}

size_t flash_attention_bf16_scratch(int T, int C, int NH) {
    return flash_head_scratch(T, flash_attention_check(1, T, C, NH, Dropout{}), FlashProducts::Bf16Dot);  // either
}

// The threads a call runs on: as many whole slices as scratch holds, at most the caller's setting.
// Inside another parallel region the layer's own region runs on the calling thread alone (nested
// regions are inactive), in slice 0.
static int flash_threads(const float* scratch, size_t scratch_size, size_t per_thread) {
    check(scratch != nullptr && scratch_size >= per_thread,
          "flash attention: scratch of {} floats is less than one thread's {}", scratch ? scratch_size : 0, per_thread);
#ifdef _OPENMP
    return int(std::min(scratch_size / per_thread, size_t(omp_get_max_threads())));
#else
    return 1;
#endif
}

static int thread_slot() {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// Where head bh's columns of out and dout (B, T, C) start.
static size_t out_at(int bh, int T, int C, int NH) {
    return size_t(bh / NH) * T * C + size_t(bh % NH) * (C / NH);
}

// Head bh's inputs (out or out16, dout and lse are the backward's; null in the forward).
static FlashHead head_at(int bh, const float* qkv, const float* out, const bf16* out16, const float* dout,
                         const float* lse, int B, int T, int C, int NH, Dropout drop) {
    const int b = bh / NH, h = bh % NH, hs = C / NH;
    const size_t C3 = 3 * size_t(C), o = out_at(bh, T, C, NH);
    const float* q = qkv + size_t(b) * T * C3 + size_t(h) * hs;  // (T, hs), row stride 3C
    return FlashHead{T,
                     hs,
                     q,
                     q + C,
                     q + 2 * size_t(C),
                     C3,
                     out ? out + o : nullptr,
                     out16 ? out16 + o : nullptr,
                     dout ? dout + o : nullptr,
                     size_t(C),
                     lse ? lse + size_t(bh) * T : nullptr,
                     drop,
                     size_t(bh) * T * T};
}

// The head after bh, which the thread running bh most likely runs next (static schedule: each
// thread takes a run of consecutive heads), or null after the last.
static const FlashHead* next_of(int bh, int B, int NH, FlashHead& next, const float* qkv, const float* out,
                                const bf16* out16, const float* dout, const float* lse, int T, int C, Dropout drop) {
    if (bh + 1 >= B * NH) return nullptr;
    next = head_at(bh + 1, qkv, out, out16, dout, lse, B, T, C, NH, drop);
    return &next;
}

static void forward(float* out, bf16* out16, float* lse, float* scratch, size_t scratch_size, const float* qkv,
                    int B, int T, int C, int NH, Dropout drop, FlashProducts products) {
    const int hs = flash_attention_check(B, T, C, NH, drop);
    check((out || out16) && lse && qkv, "flash attention: the forward needs out (or its bf16 copy), lse and qkv");
    const size_t per = flash_head_scratch(T, hs, products);
    const int threads = flash_threads(scratch, scratch_size, per);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const FlashHead head = head_at(bh, qkv, nullptr, nullptr, nullptr, nullptr, B, T, C, NH, drop);
        FlashHead after;
        const FlashHead* next = next_of(bh, B, NH, after, qkv, nullptr, nullptr, nullptr, nullptr, T, C, drop);
        const size_t at = out_at(bh, T, C, NH);
        flash_head_forward(out ? out + at : nullptr, out16 ? out16 + at : nullptr, lse + size_t(bh) * T, head, next,
                           products, scratch + size_t(thread_slot()) * per);
    }
}

static void backward(float* dqkv, bf16* dqkv16, float* scratch, size_t scratch_size, const float* dout,
                     const float* qkv, const float* out, const bf16* out16, const float* lse, int B, int T, int C,
                     int NH, Dropout drop, FlashProducts products) {
    const int hs = flash_attention_check(B, T, C, NH, drop);
    check((dqkv || dqkv16) && dout && qkv && (out || out16) && lse,
          "flash attention: the backward needs dqkv (or its bf16 copy), dout, qkv, out (or its bf16 copy) and lse");
    const size_t per = flash_head_scratch(T, hs, products);
    const int threads = flash_threads(scratch, scratch_size, per);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        const FlashHead head = head_at(bh, qkv, out, out16, dout, lse, B, T, C, NH, drop);
        FlashHead after;
        const FlashHead* next = next_of(bh, B, NH, after, qkv, out, out16, dout, lse, T, C, drop);
        const size_t at = size_t(head.q - qkv), C3 = 3 * size_t(C);  // head h's q in qkv, and dq in dqkv
        FlashGrads grads;
        grads.ld = C3;
        if (dqkv) grads.dq = dqkv + at, grads.dk = dqkv + at + C, grads.dv = dqkv + at + 2 * size_t(C);
        if (dqkv16) grads.dq16 = dqkv16 + at, grads.dk16 = dqkv16 + at + C, grads.dv16 = dqkv16 + at + 2 * size_t(C);
        flash_head_backward(grads, head, next, products, scratch + size_t(thread_slot()) * per);
    }
}

void flash_attention_forward(float* out, float* lse, float* scratch, size_t scratch_size, const float* qkv, int B,
                             int T, int C, int NH, Dropout drop) {
    forward(out, nullptr, lse, scratch, scratch_size, qkv, B, T, C, NH, drop, FlashProducts::Float);
}

void flash_attention_backward(float* dqkv, float* scratch, size_t scratch_size, const float* dout, const float* qkv,
                              const float* out, const float* lse, int B, int T, int C, int NH, Dropout drop) {
    backward(dqkv, nullptr, scratch, scratch_size, dout, qkv, out, nullptr, lse, B, T, C, NH, drop,
             FlashProducts::Float);
}

void flash_attention_forward_bf16(float* out, bf16* out16, float* lse, float* scratch, size_t scratch_size,
                                  const float* qkv, int B, int T, int C, int NH, Dropout drop, FlashProducts products) {
    check(products != FlashProducts::Float, "flash attention: the bf16 forward needs bf16 products");
    check(out16 != nullptr, "flash attention: the bf16 forward needs out16, which its backward reads");
    forward(out, out16, lse, scratch, scratch_size, qkv, B, T, C, NH, drop, products);
}

void flash_attention_backward_bf16(float* dqkv, bf16* dqkv16, float* scratch, size_t scratch_size, const float* dout,
                                   const float* qkv, const bf16* out16, const float* lse, int B, int T, int C, int NH,
                                   Dropout drop, FlashProducts products) {
    check(products != FlashProducts::Float, "flash attention: the bf16 backward needs bf16 products");
    check(out16 != nullptr, "flash attention: the bf16 backward needs the forward's out16");
    backward(dqkv, dqkv16, scratch, scratch_size, dout, qkv, nullptr, out16, lse, B, T, C, NH, drop, products);
}

}  // namespace hg
