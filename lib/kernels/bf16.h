// bf16.h — bfloat16 numbers: rounding float to bf16 (round to nearest, ties to even) and back.
//
// A bf16 is the top 16 bits of a float: the sign, the same 8 exponent bits, 7 of the 23
// fraction bits. It keeps float's range (so no scaling is needed, unlike fp16) and drops 16
// bits of precision: its unit roundoff is u = 2⁻⁸ (a rounded x is x·(1 + δ), |δ| ≤ 2⁻⁸).
// Widening back to float is exact (append 16 zero bits).
//
// Rounding to nearest even, on the float's bits b (as an unsigned 32-bit integer):
//   b + 0x7FFF + (bit 16 of b), then keep the top 16 bits.
// The low half 0x0000..0x7FFF rounds down, 0x8001..0xFFFF up (the carry runs into the kept
// bits), and the tie 0x8000 goes up only when bit 16 — the kept part's last bit — is 1: to the
// even neighbour. The same integer add handles every class of float:
//   subnormals  their bits are ordered like their values, so the add rounds them correctly
//               (no flush to zero; a bf16 subnormal keeps 7 fraction bits as well);
//   overflow    the largest floats round up into the exponent 0xFF with a zero fraction: ±inf,
//               which is what round-to-nearest gives past bf16's largest finite number;
//   ±inf        0x7F800000 has a zero low half and rounds to itself;
//   NaN         the add could carry a NaN's fraction into the sign or turn it into inf, so NaNs
//               are handled apart: the top half, with the quiet bit (bit 6 of the bf16) set.
// The Highway kernel (bf16.cpp) does exactly this on whole vectors; bf16_from_float is its
// scalar twin and the tail of every vector loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hg {

using bf16 = uint16_t;  // the bits of a bfloat16

inline uint32_t float_bits(float x) {
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// The scalar twin of bf16_round: one float to the nearest bf16, ties to even.
inline bf16 bf16_from_float(float x) {
    const uint32_t b = float_bits(x);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return bf16((b >> 16) | 0x0040u);  // NaN: keep it, quiet
    return bf16((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

// Exact: the bf16 is the float's top half.
inline float bf16_to_float(bf16 h) {
    const uint32_t b = uint32_t(h) << 16;
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

// out[i] = bf16_from_float(in[i]) for i < n: Highway, every target, bit-identical to the twin.
void bf16_round(bf16* out, const float* in, size_t n);
// The same, split over the threads in fixed pieces (for a whole activation; the bits do not
// depend on the split).
void bf16_round_parallel(bf16* out, const float* in, size_t n);
// out[i] = bf16_to_float(in[i]) for i < n.
void bf16_widen(float* out, const bf16* in, size_t n);

}  // namespace hg
