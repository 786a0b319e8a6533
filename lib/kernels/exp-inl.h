// exp-inl.h — e^x on a vector of floats, for the kernels whose exponentials are a large part of
// their work: flash attention's probabilities (flash_tile_rows-inl.h), GELU's erf form and tanh
// form (gelu_kernels.cpp), SwiGLU's sigmoid (activation_kernels.cpp), and the softmax and
// cross-entropy rows (softmax_kernels.cpp). Included inside a kernel file's per-target code; the
// guard lets foreach_target.h include it once per target.
//
//   e^x = 2^n · e^r,   n = round(x / ln 2),   r = x - n·ln 2,   |r| ≤ ln 2 / 2
//
// n·ln 2 is taken off in two parts, ln 2 = hi + lo with hi of few enough bits that n·hi is exact,
// so r is x's own remainder to within one rounding. e^r is its Taylor series to r⁷: the first term
// left out, |r|⁸/8! ≤ 4.2·10⁻⁹, is far below float's rounding (6·10⁻⁸), so the result is within a few
// roundings of e^x (the tests compare it with std::exp). 2^n is written straight into a float's
// exponent field, so n must stay at or above -126, float's smallest normal exponent: where e^x is
// below 2⁻¹²⁶ (x < -126·ln 2 ≈ -87.3) the result is 0, as a float computation that flushes
// numbers below the normal range would give. Highway's own Exp does the same reduction with more
// steps (a rounding trick for n, 2^n split in two for the full range); the range here is what its
// users need: exponents ≤ 0, a probability's or a tail's.
#if defined(HANDGRAD_KERNELS_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_EXP_INL_H_
#undef HANDGRAD_KERNELS_EXP_INL_H_
#else
#define HANDGRAD_KERNELS_EXP_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// e^x for each lane, 0 where x < -126·ln 2, for x ≤ 88 (above it 2^n would overflow the exponent
// field).
template <class DF>
HWY_INLINE hn::Vec<DF> ExpFlushed(DF d, hn::Vec<DF> x_in) {
    const hn::RebindToSigned<DF> di;
    const auto lowest = hn::Set(d, -87.33654475f);  // -126·ln 2
    const auto x = hn::Max(x_in, lowest);           // so that n ≥ -126 below
    // n: x / ln 2 added to 1.5·2²³, where a float's last place is 1, rounds it to the nearest
    // integer, which the low bits of the sum then hold (two's complement, |n| ≤ 127).
    const auto magic = hn::Set(d, 12582912.0f);
    const auto sum = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), magic);
    const auto nf = hn::Sub(sum, magic);
    auto r = hn::MulAdd(nf, hn::Set(d, -0.693145751953125f), x);   // hi: 16 significant bits
    r = hn::MulAdd(nf, hn::Set(d, -1.428606765330187045e-6f), r);  // lo = ln 2 - hi
    // Σ_{k ≤ 7} r^k / k!, in pairs of terms (Estrin's scheme: a shorter chain than Horner's)
    const auto r2 = hn::Mul(r, r), r4 = hn::Mul(r2, r2);
    const auto p01 = hn::Add(r, hn::Set(d, 1.0f));
    const auto p23 = hn::MulAdd(r, hn::Set(d, 1.0f / 6), hn::Set(d, 0.5f));
    const auto p45 = hn::MulAdd(r, hn::Set(d, 1.0f / 120), hn::Set(d, 1.0f / 24));
    const auto p67 = hn::MulAdd(r, hn::Set(d, 1.0f / 5040), hn::Set(d, 1.0f / 720));
    const auto p = hn::MulAdd(hn::MulAdd(p67, r2, p45), r4, hn::MulAdd(p23, r2, p01));
    // 2^n: n + 127 shifted into the exponent field (the sum's high bits shift out past bit 31)
    const auto two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, sum), hn::Set(di, 127))));
    return hn::IfThenElseZero(hn::Ge(x_in, lowest), hn::Mul(p, two_n));
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
