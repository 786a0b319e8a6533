// peak.cpp — the FMA loops of peak.h: Highway for f32 (every target), intrinsics for bf16.
#include "lib/kernels/peak.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/peak.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// `iters` rounds of 12 independent MulAdds, a = a·x + y in each of 12 accumulators. Accumulator
// k starts from starts[k], a value the compiler cannot see, so it can neither merge chains
// that would start alike and update alike (it did, when they started from one constant: one
// FMA ran where twelve were counted) nor fold the loop; where each ends (lane 0) is written to
// ends[k], so none is dead. Returns the FLOPs done.
double FmaChains(long iters, const float* starts, float* ends) {
    const hn::ScalableTag<float> d;
    const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
    auto a0 = hn::Set(d, starts[0]), a1 = hn::Set(d, starts[1]), a2 = hn::Set(d, starts[2]);
    auto a3 = hn::Set(d, starts[3]), a4 = hn::Set(d, starts[4]), a5 = hn::Set(d, starts[5]);
    auto a6 = hn::Set(d, starts[6]), a7 = hn::Set(d, starts[7]), a8 = hn::Set(d, starts[8]);
    auto a9 = hn::Set(d, starts[9]), a10 = hn::Set(d, starts[10]), a11 = hn::Set(d, starts[11]);
    for (long i = 0; i < iters; i++) {
        a0 = hn::MulAdd(a0, x, y), a1 = hn::MulAdd(a1, x, y), a2 = hn::MulAdd(a2, x, y);
        a3 = hn::MulAdd(a3, x, y), a4 = hn::MulAdd(a4, x, y), a5 = hn::MulAdd(a5, x, y);
        a6 = hn::MulAdd(a6, x, y), a7 = hn::MulAdd(a7, x, y), a8 = hn::MulAdd(a8, x, y);
        a9 = hn::MulAdd(a9, x, y), a10 = hn::MulAdd(a10, x, y), a11 = hn::MulAdd(a11, x, y);
    }
    ends[0] = hn::GetLane(a0), ends[1] = hn::GetLane(a1), ends[2] = hn::GetLane(a2), ends[3] = hn::GetLane(a3);
    ends[4] = hn::GetLane(a4), ends[5] = hn::GetLane(a5), ends[6] = hn::GetLane(a6), ends[7] = hn::GetLane(a7);
    ends[8] = hn::GetLane(a8), ends[9] = hn::GetLane(a9), ends[10] = hn::GetLane(a10), ends[11] = hn::GetLane(a11);
    return 2.0 * kPeakChains * double(iters) * double(hn::Lanes(d));
}

// One chain of the same MulAdds, each waiting for the one before: the FMA's latency, not its
// throughput, sets the pace.
double FmaChain(long iters, const float* starts, float* ends) {
    const hn::ScalableTag<float> d;
    const auto x = hn::Set(d, 0.999999f), y = hn::Set(d, 1e-7f);
    auto a = hn::Set(d, starts[0]);
    for (long i = 0; i < iters; i++) a = hn::MulAdd(a, x, y);
    ends[0] = hn::GetLane(a);
    return 2.0 * double(iters) * double(hn::Lanes(d));
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

#include "lib/kernels/simd.h"

namespace hg {
HWY_EXPORT(FmaChains);
HWY_EXPORT(FmaChain);

#if defined(__x86_64__) && defined(__GNUC__)
// 12 independent vdpbf16ps on constant bf16 pairs (1 · 2⁻²⁴, twice: each adds 2⁻²³), 64 FLOPs
// each; the accumulators start from starts[k] and end in ends[k] as in FmaChains.
__attribute__((target("avx512f,avx512bf16"), noinline)) static double Bf16DotChains(long iters, const float* starts,
                                                                                    float* ends) {
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    __m512 a0 = _mm512_set1_ps(starts[0]), a1 = _mm512_set1_ps(starts[1]), a2 = _mm512_set1_ps(starts[2]);
    __m512 a3 = _mm512_set1_ps(starts[3]), a4 = _mm512_set1_ps(starts[4]), a5 = _mm512_set1_ps(starts[5]);
    __m512 a6 = _mm512_set1_ps(starts[6]), a7 = _mm512_set1_ps(starts[7]), a8 = _mm512_set1_ps(starts[8]);
    __m512 a9 = _mm512_set1_ps(starts[9]), a10 = _mm512_set1_ps(starts[10]), a11 = _mm512_set1_ps(starts[11]);
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_dpbf16_ps(a0, x, y), a1 = _mm512_dpbf16_ps(a1, x, y), a2 = _mm512_dpbf16_ps(a2, x, y);
        a3 = _mm512_dpbf16_ps(a3, x, y), a4 = _mm512_dpbf16_ps(a4, x, y), a5 = _mm512_dpbf16_ps(a5, x, y);
        a6 = _mm512_dpbf16_ps(a6, x, y), a7 = _mm512_dpbf16_ps(a7, x, y), a8 = _mm512_dpbf16_ps(a8, x, y);
        a9 = _mm512_dpbf16_ps(a9, x, y), a10 = _mm512_dpbf16_ps(a10, x, y), a11 = _mm512_dpbf16_ps(a11, x, y);
    }
    ends[0] = _mm512_cvtss_f32(a0), ends[1] = _mm512_cvtss_f32(a1), ends[2] = _mm512_cvtss_f32(a2);
    ends[3] = _mm512_cvtss_f32(a3), ends[4] = _mm512_cvtss_f32(a4), ends[5] = _mm512_cvtss_f32(a5);
    ends[6] = _mm512_cvtss_f32(a6), ends[7] = _mm512_cvtss_f32(a7), ends[8] = _mm512_cvtss_f32(a8);
    ends[9] = _mm512_cvtss_f32(a9), ends[10] = _mm512_cvtss_f32(a10), ends[11] = _mm512_cvtss_f32(a11);
    return 64.0 * kPeakChains * double(iters);
}
#endif

double peak_loop(PeakLoop loop, long iters, const float* starts, float* ends) {
    switch (loop) {
        case PeakLoop::F32Chains: return HWY_DYNAMIC_DISPATCH(FmaChains)(iters, starts, ends);
        case PeakLoop::F32OneChain: return HWY_DYNAMIC_DISPATCH(FmaChain)(iters, starts, ends);
        case PeakLoop::Bf16Chains:
#if defined(__x86_64__) && defined(__GNUC__)
            if (cpu_has_bf16_dot()) return Bf16DotChains(iters, starts, ends);
#endif
            return 0;
    }
    return 0;
}

// GFLOP/s of `loop` run on `threads` threads side by side: rounds are sized from a short first
// run to take about seconds / 4 each, and the best of 4 is kept. Every thread's chains start
// from 1/2, 1/2 + 1/32, 1/2 + 2/32, ...
double peak_gflops(PeakLoop loop, int threads, double seconds) {
    if (loop == PeakLoop::Bf16Chains && !cpu_has_bf16_dot()) return 0;
    using clock = std::chrono::steady_clock;
    float starts[kPeakChains], ends[kPeakChains];
    for (int k = 0; k < kPeakChains; k++) starts[k] = 0.5f + float(k) / 32;
    long iters = 1 << 12;
    double took = 0;
    for (;;) {  // grow until one run takes over 5 ms
        const auto t0 = clock::now();
        peak_loop(loop, iters, starts, ends);
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
            float own[kPeakChains];
            flops += peak_loop(loop, iters, starts, own);
        }
        best = std::max(best, flops / std::chrono::duration<double>(clock::now() - t0).count() / 1e9);
    }
    return best;
}

double peak_f32_gflops(int threads, double seconds) { return peak_gflops(PeakLoop::F32Chains, threads, seconds); }
double peak_bf16_gflops(int threads, double seconds) { return peak_gflops(PeakLoop::Bf16Chains, threads, seconds); }

}  // namespace hg
#endif
