// simd.h — which SIMD instruction set the Highway kernels run on.
//
// Every kernel in lib/kernels/ is compiled once per target of the architecture it is built for
// (x86-64: SSE2 ... AVX-512; aarch64: NEON, SVE, SVE2, and SVE_256 / SVE2_128 for SVE machines
// of exactly 256 / 128 bits) and picked at run time by Highway's dynamic dispatch (its
// `skeleton` pattern: foreach_target.h, HWY_EXPORT, HWY_DYNAMIC_DISPATCH). Tests use
// simd_targets()/simd_force_target() to run every kernel on every target this CPU supports and
// compare it with its scalar twin.
//
// Tails: a kernel runs whole vectors with LoadU/StoreU, then finishes the last n mod Lanes
// elements without masked loads (a masked tail load from an unaligned pointer crashed a 128-bit
// build): either a scalar loop doing the same operations, or, in the elementwise kernels that
// share Map (map-inl.h), a zero-padded buffer run through the same vector code.
//
// What is bit-identical: the same SIMD target, vector width and thread setting give the same
// bits. Across targets results differ in the last bits: MulAdd is a fused multiply-add on
// AVX2, AVX-512, NEON and SVE but two roundings on SSE4 and below (and on the portable
// EMU128/SCALAR targets), and a SumOfLanes reduction adds in an order set by the vector width.
// On x86 and NEON the target fixes the width; SVE's width is the CPU's (128 to 2048 bits), and
// the SVE and SVE2 targets run at whatever width they find, so two SVE machines of different
// widths differ in the last bits under the same target name: simd_vector_bits() says which.
// Kernels that only do IEEE operations element by element, with no MulAdd and no lane sum
// (vec, dropout, AdamW), give the same bits on every target and width, as their tests check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

struct SimdTarget {
    int64_t bits;      // Highway's HWY_* target bit
    std::string name;  // "AVX3", "AVX2", "SSE4", ...
};

// The targets this binary was compiled for that this CPU can run, best first.
std::vector<SimdTarget> simd_targets();
// Make dispatch use only `target` (0 restores normal dispatch to the best target).
void simd_force_target(int64_t target);
// The target dispatch uses now.
std::string simd_current_target();
// The width in bits of a full float vector on that target (SVE: this CPU's vector length).
int simd_vector_bits();

// Does this CPU have bf16 dot products (x86's AVX512_BF16: vdpbf16ps)? Asked of the CPU, never
// assumed; false on every other architecture. Highway 1.0.3 has no target for it: the bf16
// products (matmul_bf16.h), flash attention's bf16 tiles (flash_attention_kernels.h) and the
// bf16 peak (peak.h) ask here.
bool cpu_has_bf16_dot();

}  // namespace hg
