// The machine's peak (lib/kernels/peak.h): the loops it is measured with keep their chains
// apart, on every SIMD target, and twelve chains outrun one.
#include "tests/catch.h"

#include <cmath>

#include "lib/kernels/peak.h"
#include "lib/kernels/simd.h"

using namespace hg;

namespace {

// Where an f32 chain from `start` ends after `iters` rounds of a = a·x + y, in double (the loop
// rounds to float at each round, fused or not by target: 1e-5 apart at most after 50 rounds).
double f32_chain_end(float start, long iters) {
    double a = start;
    for (long i = 0; i < iters; i++) a = a * double(0.999999f) + double(1e-7f);
    return a;
}

}  // namespace

TEST_CASE("the peak's loops: each chain ends where its own start takes it, on every SIMD target", "[peak][simd]") {
    // A compiler that merged chains starting alike and updated alike ran one FMA and counted
    // twelve; chains from different starts that end at their own values cannot have been merged.
    const long iters = 50;
    float starts[kPeakChains], ends[kPeakChains];
    for (int k = 0; k < kPeakChains; k++) starts[k] = 0.5f + float(k) / 32;
    for (const SimdTarget& t : simd_targets()) {
        INFO(t.name);
        simd_force_target(t.bits);
        CHECK(peak_loop(PeakLoop::F32Chains, iters, starts, ends) > 0);
        for (int k = 0; k < kPeakChains; k++) {
            INFO("chain " << k);
            CHECK(ends[k] == Approx(f32_chain_end(starts[k], iters)).epsilon(1e-5));
            if (k > 0) CHECK(ends[k] > ends[k - 1]);  // the starts' order, kept
        }
        float one = 0;
        CHECK(peak_loop(PeakLoop::F32OneChain, iters, starts + 5, &one) > 0);
        CHECK(one == Approx(f32_chain_end(starts[5], iters)).epsilon(1e-5));
    }
    simd_force_target(0);
    if (!cpu_has_bf16_dot()) {
        CHECK(peak_loop(PeakLoop::Bf16Chains, iters, starts, ends) == 0);
        CHECK(peak_bf16_gflops(1, 0.01) == 0);
        return;
    }
    // Each round adds 2⁻²⁴ twice, exactly below 1: the chains end iters · 2⁻²³ above their starts.
    CHECK(peak_loop(PeakLoop::Bf16Chains, iters, starts, ends) == 64.0 * kPeakChains * iters);
    for (int k = 0; k < kPeakChains; k++) CHECK(ends[k] == starts[k] + float(iters) * std::ldexp(1.0f, -23));
}

TEST_CASE("the peak's loops: twelve independent chains run at least 3x the rate of one chain", "[peak][timing]") {
    // A property of the measurement, not a timing of handgrad's code: an FMA unit is pipelined
    // (a latency of 4 cycles or more, one or two started every cycle), so one chain, each FMA
    // waiting for the last, leaves it mostly idle, and twelve independent chains fill it: 4x to
    // 12x the rate of one on any CPU with such a unit. A loop whose chains run no faster than one
    // is latency-bound, and a peak measured with it is no peak. (Instructions emulated one by
    // one, under qemu, have no pipeline: make test-arm64 leaves [timing] out.)
#ifdef __SANITIZE_ADDRESS__
    SUCCEED("make asan builds the loops at -O1 with checks on every vector: no rate to compare");
#else
    const double twelve = peak_gflops(PeakLoop::F32Chains, 1, 0.05), one = peak_gflops(PeakLoop::F32OneChain, 1, 0.05);
    INFO("12 chains " << twelve << " GFLOP/s, one chain " << one << " GFLOP/s, on " << simd_current_target());
    CHECK(one > 0);
    CHECK(twelve >= 3 * one);
#endif
}
