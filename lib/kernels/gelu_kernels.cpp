// gelu_kernels.cpp — Highway implementations of gelu_kernels.h, compiled for every target by
// foreach_target.h.
//
// Highway 1.0.3's contrib math has no erf, so NormalCdf below builds
// Φ(x) = (1 + erf(x/√2))/2 from erf(z), z = x/√2, in two pieces (t = |z|, s = z²):
//   t <= 0.927734375:  erf(z) = z + z·P(s), P a degree-6 polynomial fitted to erf(z)/z - 1 on
//                      [0, 0.927734375²] (Chebyshev fit with mpmath; max |error| of P 4.6e-10)
//   t >  0.927734375:  erfc(t) = exp(Q(t)), Q(t) = -t + t·(degree-6 polynomial in t), the
//                      form and coefficients of N. Juffa's faithfully rounded erff (posted on
//                      Stack Overflow); t is clamped to 10, where erfc(t) < 1e-44.
// Then Φ = 1 - erfc(t)/2 for z > 0 and erfc(t)/2 for z < 0: no cancellation in the left tail.
// Every exponential here is exp-inl.h's (within a few roundings; 0 where e^x is under float's
// normal range, as erfc(t) is past t ≈ 9.2).
// Measured on a 1e-4 grid over x in [-20, 20] against double erfc: |Φ error| <= 6.6e-8
// (about 1 ulp of values near 1); so erf is accurate to ~1e-7 absolute, the bound the kernel
// tests hold Φ to, and gelu = x·Φ to about 1 ulp of |x|. Without FMA (SSE2/SSSE3/SSE4
// targets) MulAdd rounds twice, which adds at most about one more ulp.
//
// Tails: every kernel goes through Map (map-inl.h), which runs the last n mod Lanes elements
// through a zero-padded buffer and the same vector code, so each element gets the same bits
// wherever it sits in the array; a scalar tail would compute a different approximation
// (std::erfc) for a few elements depending on n.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/gelu_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/exp-inl.h"
#include "lib/kernels/gelu_kernels.h"
#include "lib/kernels/map-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kCubic = 0.044715f;

// Φ(x), the standard normal CDF (see the top of the file for the method and its accuracy).
HWY_INLINE V NormalCdf(D d, V x) {
    const V z = hn::Mul(x, hn::Set(d, kInvSqrt2));
    const V t = hn::Abs(z);
    const V s = hn::Mul(z, z);
    const V half = hn::Set(d, 0.5f);

    // |z| small: erf(z) = z + z·P(z²)
    V p = hn::Set(d, 8.349471992712617e-05f);
    p = hn::MulAdd(p, s, hn::Set(d, -8.138217388997281e-04f));
    p = hn::MulAdd(p, s, hn::Set(d, 5.200678942053414e-03f));
    p = hn::MulAdd(p, s, hn::Set(d, -2.685927683057835e-02f));
    p = hn::MulAdd(p, s, hn::Set(d, 1.1283693782028016e-01f));
    p = hn::MulAdd(p, s, hn::Set(d, -3.7612633664288586e-01f));
    p = hn::MulAdd(p, s, hn::Set(d, 1.283791666358632e-01f));
    const V erf_small = hn::MulAdd(z, p, z);
    const V cdf_small = hn::MulAdd(half, erf_small, half);

    // |z| large: erfc(t) = exp(Q(t))
    const V tc = hn::Min(t, hn::Set(d, 10.0f));
    V r = hn::MulAdd(hn::Set(d, -1.72853470e-5f), tc, hn::Set(d, 3.83197126e-4f));
    const V u = hn::MulAdd(hn::Set(d, -3.88396438e-3f), tc, hn::Set(d, 2.42546219e-2f));
    r = hn::MulAdd(r, hn::Mul(tc, tc), u);
    r = hn::MulAdd(r, tc, hn::Set(d, -1.06777877e-1f));
    r = hn::MulAdd(r, tc, hn::Set(d, -6.34846687e-1f));
    r = hn::MulAdd(r, tc, hn::Set(d, -1.28717512e-1f));
    r = hn::MulAdd(r, tc, hn::Neg(tc));
    const V half_erfc = hn::Mul(half, ExpFlushed(d, r));
    const V cdf_large =
        hn::IfThenElse(hn::Gt(z, hn::Zero(d)), hn::Sub(hn::Set(d, 1.0f), half_erfc), half_erfc);

    return hn::IfThenElse(hn::Le(t, hn::Set(d, 0.927734375f)), cdf_small, cdf_large);
}

// gelu_tanh's u = √(2/π)·x·(1 + 0.044715 x²)
HWY_INLINE V TanhArg(D d, V x) {
    return hn::Mul(hn::Mul(hn::Set(d, kSqrt2OverPi), x),
                   hn::MulAdd(hn::Set(d, kCubic), hn::Mul(x, x), hn::Set(d, 1.0f)));
}

// The tanh form through one exponential: with e = exp(-2|u|) in (0, 1] (never overflows) and
// r = 1/(1 + e),
//   (1 + tanh u)/2 = σ(2u) = r for u >= 0, e·r for u < 0     (no cancellation: a quotient)
//   sech² u = 1 - tanh² u = 4e·r²                             (no cancellation either)
// so forward and backward each cost one exponential and one Div (Highway's Tanh plus a separate sech²
// cost two of each). Returns (1 + tanh u)/2 and sets sech2 = sech² u (an out-parameter, not a
// struct: SVE vectors cannot be struct members).
HWY_INLINE V TanhOf(D d, V u, V& sech2) {
    const V e = ExpFlushed(d, hn::Mul(hn::Set(d, -2.0f), hn::Abs(u)));
    const V r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
    const V er = hn::Mul(e, r);
    sech2 = hn::Mul(hn::Set(d, 4.0f), hn::Mul(er, r));
    return hn::IfThenElse(hn::Lt(u, hn::Zero(d)), er, r);
}

// The four maps, each once; the kernels below store them in float (Map) or bf16 (MapToBf16).
HWY_INLINE V ErfForwardOf(D d, V x) { return hn::Mul(x, NormalCdf(d, x)); }
// gelu'(x) = Φ(x) + x·φ(x), φ(x) = exp(-x²/2)/√(2π)
HWY_INLINE V ErfBackwardOf(D d, V x, V g) {
    const V pdf = hn::Mul(hn::Set(d, kInvSqrt2Pi), ExpFlushed(d, hn::Mul(hn::Set(d, -0.5f), hn::Mul(x, x))));
    return hn::Mul(hn::MulAdd(x, pdf, NormalCdf(d, x)), g);
}
HWY_INLINE V TanhForwardOf(D d, V x) {
    V sech2 = hn::Zero(d);
    return hn::Mul(x, TanhOf(d, TanhArg(d, x), sech2));  // x·(1 + tanh u)/2
}
// gelu'(x) = (1 + tanh u)/2 + x/2·sech² u·√(2/π)(1 + 3·0.044715 x²)
HWY_INLINE V TanhBackwardOf(D d, V x, V g) {
    const V du =
        hn::Mul(hn::Set(d, kSqrt2OverPi), hn::MulAdd(hn::Set(d, 3.0f * kCubic), hn::Mul(x, x), hn::Set(d, 1.0f)));
    V sech2 = hn::Zero(d);
    const V sigma = TanhOf(d, TanhArg(d, x), sech2);
    const V grad = hn::MulAdd(hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), sech2), du, sigma);
    return hn::Mul(grad, g);
}

void GeluErfForward(float* out, const float* inp, size_t n) {
    Map<1, 1>({inp}, {out}, n, [](D d, V x) HWY_ATTR { return ErfForwardOf(d, x); });
}
void GeluErfBackward(float* dinp, const float* inp, const float* dout, size_t n) {
    Map<2, 1>({inp, dout}, {dinp}, n, [](D d, V x, V g) HWY_ATTR { return ErfBackwardOf(d, x, g); });
}
void GeluTanhForward(float* out, const float* inp, size_t n) {
    Map<1, 1>({inp}, {out}, n, [](D d, V x) HWY_ATTR { return TanhForwardOf(d, x); });
}
void GeluTanhBackward(float* dinp, const float* inp, const float* dout, size_t n) {
    Map<2, 1>({inp, dout}, {dinp}, n, [](D d, V x, V g) HWY_ATTR { return TanhBackwardOf(d, x, g); });
}
void GeluErfForwardBf16(bf16* out16, const float* inp, size_t n) {
    MapToBf16<1>({inp}, out16, n, [](D d, V x) HWY_ATTR { return ErfForwardOf(d, x); });
}
void GeluErfBackwardBf16(bf16* dinp16, const float* inp, const float* dout, size_t n) {
    MapToBf16<2>({inp, dout}, dinp16, n, [](D d, V x, V g) HWY_ATTR { return ErfBackwardOf(d, x, g); });
}
void GeluTanhForwardBf16(bf16* out16, const float* inp, size_t n) {
    MapToBf16<1>({inp}, out16, n, [](D d, V x) HWY_ATTR { return TanhForwardOf(d, x); });
}
void GeluTanhBackwardBf16(bf16* dinp16, const float* inp, const float* dout, size_t n) {
    MapToBf16<2>({inp, dout}, dinp16, n, [](D d, V x, V g) HWY_ATTR { return TanhBackwardOf(d, x, g); });
}
void NormalCdfKernel(float* out, const float* inp, size_t n) {
    Map<1, 1>({inp}, {out}, n, [](D d, V x) HWY_ATTR { return NormalCdf(d, x); });
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(GeluErfForward);
HWY_EXPORT(GeluErfBackward);
HWY_EXPORT(GeluTanhForward);
HWY_EXPORT(GeluTanhBackward);
HWY_EXPORT(NormalCdfKernel);
HWY_EXPORT(GeluErfForwardBf16);
HWY_EXPORT(GeluErfBackwardBf16);
HWY_EXPORT(GeluTanhForwardBf16);
HWY_EXPORT(GeluTanhBackwardBf16);

void gelu_erf_forward_kernel(float* out, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluErfForward)(out, inp, n);
}
void gelu_erf_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluErfBackward)(dinp, inp, dout, n);
}
void gelu_tanh_forward_kernel(float* out, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluTanhForward)(out, inp, n);
}
void gelu_tanh_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluTanhBackward)(dinp, inp, dout, n);
}
void normal_cdf_kernel(float* out, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(NormalCdfKernel)(out, inp, n);
}
void gelu_erf_forward_bf16_kernel(bf16* out16, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluErfForwardBf16)(out16, inp, n);
}
void gelu_erf_backward_bf16_kernel(bf16* dinp16, const float* inp, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluErfBackwardBf16)(dinp16, inp, dout, n);
}
void gelu_tanh_forward_bf16_kernel(bf16* out16, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluTanhForwardBf16)(out16, inp, n);
}
void gelu_tanh_backward_bf16_kernel(bf16* dinp16, const float* inp, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(GeluTanhBackwardBf16)(dinp16, inp, dout, n);
}

}  // namespace hg
#endif
