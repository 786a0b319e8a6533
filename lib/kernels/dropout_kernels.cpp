// dropout_kernels.cpp — Highway implementation of dropout_kernels.h, compiled for every
// target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/dropout_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/dropout_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// mix64 (lib/core/rng.h) on every 64-bit lane.
template <class D, class V>
V Mix64(D d, V z) {
    z = hn::Mul(hn::Xor(z, hn::ShiftRight<30>(z)), hn::Set(d, 0xbf58476d1ce4e5b9ULL));
    z = hn::Mul(hn::Xor(z, hn::ShiftRight<27>(z)), hn::Set(d, 0x94d049bb133111ebULL));
    return hn::Xor(z, hn::ShiftRight<31>(z));
}

// The hash needs 64-bit lanes, so the floats go as many at a time as a vector has 64-bit lanes
// (half a float vector). Lane j holds z = key + φ·(i + 1) for its element i, as hash_uniform
// forms it, and z steps by φ·lanes from one group to the next (integer arithmetic wraps the same
// way in both). The top 24 bits of mix64(z), < 2²⁴, convert exactly to double and then to float,
// and times 2⁻²⁴ give hash_uniform's value exactly: the comparison with p is hash_uniform's.
// KeepMask: one group's mask from its hash inputs z, one float lane per element, set where kept.
template <class DU, class DF>
HWY_INLINE auto KeepMask(DU du, DF df, hn::Vec<DU> z, hn::Vec<DF> vp) {
    const hn::Rebind<double, DU> dd;  // as many lanes of each
    const hn::Rebind<int64_t, DU> di;
    const auto bits = hn::BitCast(di, hn::ShiftRight<40>(Mix64(du, z)));  // < 2²⁴
    const auto u = hn::Mul(hn::DemoteTo(df, hn::ConvertTo(dd, bits)), hn::Set(df, 1.0f / 16777216.0f));
    return hn::Ge(u, vp);
}

// out = dropout(inp) for elements i0 .. i0+n; out2 = dropout(inp2) with the same mask when out2
// is not null: one hash for both.
void DropoutApply(float* out, const float* inp, float* out2, const float* inp2, size_t n, float p, uint64_t key,
                  size_t i0) {
    constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // φ, hash_uniform's step
    const hn::ScalableTag<uint64_t> du;
    const hn::Rebind<float, decltype(du)> df;
    const size_t L = hn::Lanes(du);
    auto z = hn::Add(hn::Set(du, key + kGolden * (uint64_t(i0) + 1)), hn::Mul(hn::Iota(du, 0), hn::Set(du, kGolden)));
    const auto step = hn::Set(du, kGolden * uint64_t(L));
    const auto vp = hn::Set(df, p), vscale = hn::Set(df, 1.0f / (1.0f - p));
    size_t j = 0;
    for (; j + L <= n; j += L, z = hn::Add(z, step)) {
        const auto keep = KeepMask(du, df, z, vp);
        hn::StoreU(hn::IfThenElseZero(keep, hn::Mul(hn::LoadU(df, inp + j), vscale)), df, out + j);
        if (out2) hn::StoreU(hn::IfThenElseZero(keep, hn::Mul(hn::LoadU(df, inp2 + j), vscale)), df, out2 + j);
    }
    const Dropout drop{p, key};
    for (; j < n; j++) {  // scalar tail (simd.h)
        out[j] = drop.apply(inp[j], i0 + j);
        if (out2) out2[j] = drop.apply(inp2[j], i0 + j);
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(DropoutApply);

void dropout_apply_kernel(float* out, const float* inp, size_t n, const Dropout& drop, size_t i0) {
    HWY_DYNAMIC_DISPATCH(DropoutApply)(out, inp, nullptr, nullptr, n, drop.p, drop.key, i0);
}

void dropout_apply2_kernel(float* out, const float* inp, float* out2, const float* inp2, size_t n,
                           const Dropout& drop, size_t i0) {
    HWY_DYNAMIC_DISPATCH(DropoutApply)(out, inp, out2, inp2, n, drop.p, drop.key, i0);
}

}  // namespace hg
#endif
