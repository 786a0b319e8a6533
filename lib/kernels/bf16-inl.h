// bf16-inl.h — one vector of floats rounded to bf16 and stored (the rule is in bf16.h), for the
// Highway kernels that write bf16: bf16_round (bf16.cpp) and AdamW's update, which writes each
// weight's bf16 copy as it writes the weight (adamw.cpp). Included inside a kernel file's
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

// out[0 .. Lanes(df)) = bf16_from_float of x's lanes: integer operations only, so every target
// gives the scalar twin's bits.
template <class DF>
HWY_INLINE void StoreBf16(DF df, hn::Vec<DF> x, bf16* out) {
    const hn::RebindToUnsigned<DF> du;               // u32 lanes
    const hn::RebindToSigned<DF> di;                 // i32 lanes
    const hn::Rebind<uint16_t, decltype(di)> d16;    // as many u16 lanes
    const auto b = hn::BitCast(du, x);
    const auto top = hn::ShiftRight<16>(b);
    const auto rounded =
        hn::ShiftRight<16>(hn::Add(hn::Add(b, hn::Set(du, 0x7FFFu)), hn::And(top, hn::Set(du, 1u))));
    const auto nan = hn::RebindMask(du, hn::IsNaN(x));
    const auto r = hn::IfThenElse(nan, hn::Or(top, hn::Set(du, 0x0040u)), rounded);
    // Every lane is ≤ 0xFFFF now, so the saturating i32 → u16 narrowing is exact.
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, out);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif
