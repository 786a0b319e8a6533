// peak.cpp — the FMA loops of peak.h: Highway for f32 (every target), intrinsics for bf16.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/peak.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// `iters` rounds of 12 independent MulAdds; returns the FLOPs done and writes a sum of the
// accumulators to *sink so that the compiler keeps the loop.
double FmaLoop(long iters, float* sink) {
    const hn::ScalableTag<float> d;
    const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
    auto a0 = hn::Set(d, 0.f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    auto a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    for (long i = 0; i < iters; i++) {
        a0 = hn::MulAdd(a0, x, y), a1 = hn::MulAdd(a1, x, y), a2 = hn::MulAdd(a2, x, y);
        a3 = hn::MulAdd(a3, x, y), a4 = hn::MulAdd(a4, x, y), a5 = hn::MulAdd(a5, x, y);
        a6 = hn::MulAdd(a6, x, y), a7 = hn::MulAdd(a7, x, y), a8 = hn::MulAdd(a8, x, y);
        a9 = hn::MulAdd(a9, x, y), a10 = hn::MulAdd(a10, x, y), a11 = hn::MulAdd(a11, x, y);
    }
    const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
    *sink = hn::GetLane(hn::Add(s, hn::Add(hn::Add(a8, a9), hn::Add(a10, a11))));
    return 2.0 * 12 * double(iters) * double(hn::Lanes(d));
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>  // the bf16 dot-product loop below, x86 only
#endif
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "lib/kernels/peak.h"

namespace hg {
HWY_EXPORT(FmaLoop);

#if defined(__x86_64__) && defined(__GNUC__)
// 12 independent vdpbf16ps on constant bf16 pairs; 64 FLOPs each.
__attribute__((target("avx512f,avx512bf16"))) static double Bf16DotLoop(long iters, float* sink) {
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    __m512 a6 = a0, a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_dpbf16_ps(a0, x, y), a1 = _mm512_dpbf16_ps(a1, x, y), a2 = _mm512_dpbf16_ps(a2, x, y);
        a3 = _mm512_dpbf16_ps(a3, x, y), a4 = _mm512_dpbf16_ps(a4, x, y), a5 = _mm512_dpbf16_ps(a5, x, y);
        a6 = _mm512_dpbf16_ps(a6, x, y), a7 = _mm512_dpbf16_ps(a7, x, y), a8 = _mm512_dpbf16_ps(a8, x, y);
        a9 = _mm512_dpbf16_ps(a9, x, y), a10 = _mm512_dpbf16_ps(a10, x, y), a11 = _mm512_dpbf16_ps(a11, x, y);
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    *sink = _mm512_reduce_add_ps(_mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
    return 64.0 * 12 * double(iters);
}
#endif

bool cpu_has_bf16_dot() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

// GFLOP/s of `loop` run on `threads` threads side by side: rounds are sized from a short
// first run to take about seconds / 4 each, and the best of 4 is kept.
static double rate(const std::function<double(long, float*)>& loop, int threads, double seconds) {
    using clock = std::chrono::steady_clock;
    float sink = 0;
    long iters = 1 << 12;
    double took = 0;
    for (;;) {  // grow until one run takes over 5 ms
        const auto t0 = clock::now();
        loop(iters, &sink);
        took = std::chrono::duration<double>(clock::now() - t0).count();
        if (took > 0.005 || iters > (1L << 40)) break;
        iters *= 4;
    }
    iters = std::max(1L, long(double(iters) * (seconds / 4) / took));
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        double flops = 0;
        const auto t0 = clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        {
            float s = 0;
            flops += loop(iters, &s);
            if (s == 12345.f) sink += s;  // never true; keeps the result live
        }
        best = std::max(best, flops / std::chrono::duration<double>(clock::now() - t0).count() / 1e9);
    }
    return best + 0 * sink;
}

double peak_f32_gflops(int threads, double seconds) {
    return rate([](long iters, float* sink) { return HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, sink); }, threads, seconds);
}

double peak_bf16_gflops(int threads, double seconds) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (cpu_has_bf16_dot()) return rate(Bf16DotLoop, threads, seconds);
#endif
    return 0;
}

}  // namespace hg
#endif
