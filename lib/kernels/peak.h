// peak.h — what this CPU's cores can compute at most: the rate of independent fused
// multiply-adds, measured, so a training step's GFLOP/s can be set against the hardware and
// not only against a library.
//
// peak_f32_gflops: a Highway loop of independent MulAdds on the widest SIMD target dispatch
// picks (simd.h), kPeakChains accumulators so every FMA unit stays busy whatever its latency,
// run on `threads` OpenMP threads at once; 2 FLOPs per lane per MulAdd. On SSE4 and below
// MulAdd is a multiply and an add, still counted as 2.
//
// peak_bf16_gflops: the same with AVX512_BF16's dot product of bf16 pairs into f32 lanes
// (vdpbf16ps: 16 f32 lanes, each adding two products, 64 FLOPs per instruction), compiled
// for that instruction set alone and run only when the CPU reports it (cpu_has_bf16_dot,
// simd.h); 0 where it does not. Highway has no such operation at this version, so these few
// lines use the intrinsic.
//
// Each accumulator is a chain of its own, started from a value given at run time: chains that
// started from one constant and were updated alike would be one chain to the compiler, which
// then runs one instruction where twelve are counted. Tests check both that the chains end
// apart and that they run faster together than one chain alone.
//
// Both take about `seconds` of wall time (the best of a few repeats). No twin: nothing here is
// an answer, only a rate.
#pragma once

namespace hg {

inline constexpr int kPeakChains = 12;

double peak_f32_gflops(int threads, double seconds = 0.2);
double peak_bf16_gflops(int threads, double seconds = 0.2);  // 0 without AVX512_BF16

// The loops behind them. F32Chains and Bf16Chains: the kPeakChains accumulators the peaks are
// measured with; F32OneChain: one accumulator alone, each MulAdd waiting for the one before
// (its rate is the FMA's latency, not its throughput).
enum class PeakLoop { F32Chains, F32OneChain, Bf16Chains };
// GFLOP/s of `loop`, as the peaks above measure it (0 for Bf16Chains without AVX512_BF16).
double peak_gflops(PeakLoop loop, int threads, double seconds = 0.2);
// One run of `loop` on this thread, `iters` rounds: accumulator k starts from starts[k] (in
// every lane) and its lane 0 ends in ends[k] (kPeakChains of each; one for F32OneChain). f32:
// a = a·0.999999 + 1e-7 per round; bf16: a += 2 · (1 · 2⁻²⁴). Returns the FLOPs it counts.
double peak_loop(PeakLoop loop, long iters, const float* starts, float* ends);

}  // namespace hg
