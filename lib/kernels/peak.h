// peak.h — what this CPU's cores can compute at most: the rate of independent fused
// multiply-adds, measured, so a training step's GFLOP/s can be set against the hardware and
// not only against a library.
//
// peak_f32_gflops: a Highway loop of independent MulAdds on the widest SIMD target dispatch
// picks (simd.h), twelve accumulators so every FMA unit stays busy whatever its latency, run
// on `threads` OpenMP threads at once; 2 FLOPs per lane per MulAdd. On SSE4 and below MulAdd
// is a multiply and an add, still counted as 2.
//
// peak_bf16_gflops: the same with AVX512_BF16's dot product of bf16 pairs into f32 lanes
// (vdpbf16ps: 16 f32 lanes, each adding two products, 64 FLOPs per instruction), compiled
// for that instruction set alone and run only when the CPU reports it; 0 where it does not.
// Highway has no such operation at this version, so these few lines use the intrinsic.
//
// Both take about `seconds` of wall time (the best of a few repeats). No twin: nothing here is
// an answer, only a rate.
#pragma once

namespace hg {

double peak_f32_gflops(int threads, double seconds = 0.2);
// Does this CPU have bf16 dot products (AVX512_BF16)? Asked of the CPU, never assumed.
bool cpu_has_bf16_dot();
double peak_bf16_gflops(int threads, double seconds = 0.2);

}  // namespace hg
