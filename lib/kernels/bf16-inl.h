// bf16-inl.h — one vector of floats rounded to bf16 (the rule is in bf16.h), stored or kept in
// 32-bit lanes, for the Highway kernels that write bf16: bf16_round (bf16.cpp), AdamW's update,
// which writes each weight's bf16 copy as it writes the weight (adamw.cpp), and the flash
// attention's bf16 operands (flash_attention_kernels.cpp). Included inside a kernel file's
// per-target code; the guard lets foreach_target.h include it once per target.
#if defined(HANDGRAD_KERNELS_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_BF16_INL_H_
#undef HANDGRAD_KERNELS_BF16_INL_H_
#else
#define HANDGRAD_KERNELS_BF16_INL_H_
#endif

#include <hwy/highway.h>

#include "lib/kernels/bf16.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The bf16 of each lane of x (bf16_from_float), in the low 16 bits of a 32-bit lane, the high 16
// bits 0: integer operations only, so every target gives the scalar twin's bits.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16Bits(DF /*df*/, hn::Vec<DF> x) {
    const hn::RebindToUnsigned<DF> du;  // u32 lanes
    const auto b = hn::BitCast(du, x);
    const auto top = hn::ShiftRight<16>(b);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(hn::Add(b, hn::Set(du, 0x7FFFu)), hn::And(top, hn::Set(du, 1u))));
    const auto nan = hn::RebindMask(du, hn::IsNaN(x));
    return hn::IfThenElse(nan, hn::Or(top, hn::Set(du, 0x0040u)), rounded);
}

// out[0 .. Lanes(df)) = bf16_from_float of x's lanes.
template <class DF>
HWY_INLINE void StoreBf16(DF df, hn::Vec<DF> x, bf16* out) {
    const hn::RebindToSigned<DF> di;                 // i32 lanes
    const hn::Rebind<uint16_t, decltype(di)> d16;    // as many u16 lanes
    // Every lane is ≤ 0xFFFF, so the saturating i32 → u16 narrowing is exact.
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, Bf16Bits(df, x))), d16, out);
}

// out[0 .. n) = bf16_from_float of in[0 .. n): whole vectors, then the scalar twin on the tail.
template <class DF>
HWY_INLINE void StoreBf16Run(DF df, const float* in, bf16* out, size_t n) {
    const size_t L = hn::Lanes(df);
    size_t i = 0;
    for (; i + L <= n; i += L) StoreBf16(df, hn::LoadU(df, in + i), out + i);
    for (; i < n; i++) out[i] = bf16_from_float(in[i]);
}

// Lanes(df) floats from in[0 ..): each bf16 widened exactly (bf16_to_float), its 16 bits placed
// above 16 zero bits.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBf16AsFloat(DF df, const bf16* in) {
    const hn::RebindToUnsigned<DF> du;              // u32 lanes
    const hn::Rebind<uint16_t, decltype(du)> d16;   // as many u16 lanes
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in))));
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
