// bf16.cpp — Highway implementations of bf16_round and bf16_widen (bf16.h), compiled for every
// target by foreach_target.h. Integer operations only, so every target gives the twin's bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/bf16.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/bf16.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Bf16Round(bf16* out, const float* in, size_t n) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;      // u32 lanes
    const hn::RebindToSigned<decltype(df)> di;        // i32 lanes
    const hn::Rebind<uint16_t, decltype(di)> d16;     // as many u16 lanes
    const size_t L = hn::Lanes(df);
    const auto one = hn::Set(du, 1u), half_minus_one = hn::Set(du, 0x7FFFu), quiet = hn::Set(du, 0x0040u);
    size_t i = 0;
    for (; i + L <= n; i += L) {
        const auto x = hn::LoadU(df, in + i);
        const auto b = hn::BitCast(du, x);
        const auto top = hn::ShiftRight<16>(b);
        const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(b, half_minus_one), hn::And(top, one)));
        const auto nan = hn::RebindMask(du, hn::IsNaN(x));
        const auto r = hn::IfThenElse(nan, hn::Or(top, quiet), rounded);
        // Every lane is ≤ 0xFFFF now, so the saturating i32 → u16 narrowing is exact.
        hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, out + i);
    }
    for (; i < n; i++) out[i] = bf16_from_float(in[i]);  // scalar tail (simd.h): the twin
}

void Bf16Widen(float* out, const bf16* in, size_t n) {
    const hn::ScalableTag<float> df;
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::Rebind<uint16_t, decltype(du)> d16;
    const size_t L = hn::Lanes(df);
    size_t i = 0;
    for (; i + L <= n; i += L)
        hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in + i)))), df, out + i);
    for (; i < n; i++) out[i] = bf16_to_float(in[i]);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(Bf16Round);
HWY_EXPORT(Bf16Widen);

void bf16_round(bf16* out, const float* in, size_t n) { HWY_DYNAMIC_DISPATCH(Bf16Round)(out, in, n); }
void bf16_widen(float* out, const bf16* in, size_t n) { HWY_DYNAMIC_DISPATCH(Bf16Widen)(out, in, n); }

}  // namespace hg
#endif
