// dropout-inl.h — dropout's mask on a vector of floats, for kernels that apply it inside a pass of
// their own (dropout_kernels.cpp, the flash layer's row passes): bit for bit Dropout::keep
// (dropout_kernels.h). Included inside a kernel file's per-target code; the guard lets
// foreach_target.h include it once per target.
//
// keep(i) is hash_uniform(key, i) ≥ p, and hash_uniform is the top 24 bits of mix64(z), z = key +
// φ·(i + 1), times 2⁻²⁴, exactly. So keep(i) ⟺ bits ≥ p·2²⁴ ⟺ bits ≥ ⌈p·2²⁴⌉ (bits an integer; p·2²⁴
// exact, p scaled by a power of two): the mask compares integers, with no conversion to float.
// mix64 needs 64-bit lanes, so a vector of floats is hashed as two vectors of half as many 64-bit
// lanes, whose high 32-bit halves are then gathered into one vector of 32-bit lanes and shifted down
// by 8: bits 40–63, the same 24 bits. mix64's last step, z ^ (z >> 31), changes only bits 0–32 of z,
// so the vector hash stops before it (Mix64High).
#if defined(HANDGRAD_KERNELS_DROPOUT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_DROPOUT_INL_H_
#undef HANDGRAD_KERNELS_DROPOUT_INL_H_
#else
#define HANDGRAD_KERNELS_DROPOUT_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/rng.h"  // mix64, hash_uniform
#include "lib/kernels/dropout_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // φ, hash_uniform's step

// mix64 (lib/core/rng.h) on every 64-bit lane, but for its last step: bits 33–63 are mix64's.
template <class D, class V>
HWY_INLINE V Mix64High(D d, V z) {
    z = hn::Mul(hn::Xor(z, hn::ShiftRight<30>(z)), hn::Set(d, 0xbf58476d1ce4e5b9ULL));
    return hn::Mul(hn::Xor(z, hn::ShiftRight<27>(z)), hn::Set(d, 0x94d049bb133111ebULL));
}

// One dropout's mask along a run of consecutive elements, Lanes(df) at a time. It holds numbers only
// (a vector may not be a member on every target); what `at` builds from them alone is the same on
// every call, and the compiler lifts it out of the caller's loop.
struct KeepLanes {
    uint64_t z0;        // the hash input of the run's first element
    int32_t threshold;  // ⌈p·2²⁴⌉ (≥ 1 for p > 0)
    // The run starts at element i0 of `drop`'s mask.
    KeepLanes(const Dropout& drop, size_t i0)
        : z0(drop.key + kGolden * (uint64_t(i0) + 1)), threshold(int32_t(std::ceil(double(drop.p) * 16777216.0))) {}
    // Set in lane l where the run's element j + l is kept.
    template <class DF>
    HWY_INLINE hn::Mask<DF> at(DF df, size_t j) const {
        const hn::RebindToSigned<DF> di;
        const uint64_t z = z0 + kGolden * uint64_t(j);
#if HWY_TARGET == HWY_SCALAR
        const auto bits = hn::Set(di, int32_t(mix64(z) >> 40));
#else
        const hn::Repartition<uint64_t, DF> d64;  // half as many lanes
        const hn::RebindToUnsigned<DF> du;
        const auto lo = hn::Add(hn::Set(d64, z), hn::Mul(hn::Iota(d64, 0), hn::Set(d64, kGolden)));
        const auto hi = hn::Add(lo, hn::Set(d64, kGolden * uint64_t(hn::Lanes(d64))));
        const auto lo_high = hn::BitCast(du, Mix64High(d64, lo));
        const auto hi_high = hn::BitCast(du, Mix64High(d64, hi));
        const auto bits = hn::BitCast(di, hn::ShiftRight<8>(hn::ConcatOdd(du, hi_high, lo_high)));  // in order
#endif
        return hn::RebindMask(df, hn::Gt(bits, hn::Set(di, threshold - 1)));  // bits ≥ ⌈p·2²⁴⌉
    }
};

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
