// activation_kernels.cpp — Highway implementations of activation_kernels.h, compiled for every
// target by foreach_target.h.
//
// σ(a) through one exponential that never overflows: with e = exp(-|a|) in [0, 1] and
// r = 1/(1 + e),
//   σ(a) = r for a >= 0, e·r for a < 0;   1 - σ(a) = σ(-a) = e·r for a >= 0, r for a < 0
// both quotients, so neither cancels (1 - σ(a) computed as a difference would keep only
// rounding error for a > ~17). The exponential is exp-inl.h's: within a few roundings, 0 below
// -87.3 (where e^a is under float's normal range).
// tanh for the soft-cap is hwy's Tanh (within 4 ulp, exact ±1 past |x| = 18.7).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/activation_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "lib/kernels/activation_kernels.h"
#include "lib/kernels/exp-inl.h"
#include "lib/kernels/map-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Returns σ(a) and sets one_minus = 1 - σ(a) (an out-parameter, not a struct: SVE vectors
// cannot be struct members).
HWY_INLINE V SigmoidOf(D d, V a, V& one_minus) {
    const V e = ExpFlushed(d, hn::Neg(hn::Abs(a)));
    const V r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
    const V er = hn::Mul(e, r);
    const auto neg = hn::Lt(a, hn::Zero(d));
    one_minus = hn::IfThenElse(neg, r, er);
    return hn::IfThenElse(neg, er, r);
}

void SwigluForward(float* out, const float* a, const float* b, size_t n) {
    Map<2, 1>({a, b}, {out}, n, [](D d, V va, V vb) HWY_ATTR {
        V one_minus = hn::Zero(d);
        return hn::Mul(hn::Mul(va, SigmoidOf(d, va, one_minus)), vb);  // a·σ(a)·b
    });
}

// silu'(a) = σ(a) · (1 + a · (1 - σ(a)))
void SwigluBackward(float* da, float* db, const float* a, const float* b, const float* dout,
                    size_t n) {
    Map<3, 2>({a, b, dout}, {da, db}, n, [](D d, V va, V vb, V vdout, V& vda, V& vdb) HWY_ATTR {
        V one_minus = hn::Zero(d);
        const V sigma = SigmoidOf(d, va, one_minus);
        const V dsilu = hn::Mul(sigma, hn::MulAdd(va, one_minus, hn::Set(d, 1.0f)));
        vda = hn::Mul(hn::Mul(vdout, vb), dsilu);    // dout·b·silu'(a)
        vdb = hn::Mul(vdout, hn::Mul(va, sigma));    // dout·silu(a)
    });
}

void Relu2Forward(float* out, const float* inp, size_t n) {
    Map<1, 1>({inp}, {out}, n, [](D d, V x) HWY_ATTR {
        const V r = hn::Max(x, hn::Zero(d));
        return hn::Mul(r, r);
    });
}

void Relu2Backward(float* dinp, const float* inp, const float* dout, size_t n) {
    Map<2, 1>({inp, dout}, {dinp}, n, [](D d, V x, V g) HWY_ATTR {
        const V r = hn::Max(x, hn::Zero(d));
        return hn::Mul(hn::Mul(hn::Set(d, 2.0f), r), g);  // (2·relu(x))·dout
    });
}

void SoftcapForward(float* out, const float* inp, size_t n, float cap) {
    Map<1, 1>({inp}, {out}, n, [cap](D d, V x) HWY_ATTR {
        const V vcap = hn::Set(d, cap);
        return hn::Mul(vcap, hn::Tanh(d, hn::Div(x, vcap)));
    });
}

// sech²(z/cap) = 1 - t², t = y/cap = tanh(z/cap)
void SoftcapBackward(float* dinp, const float* out, const float* dout, size_t n, float cap) {
    Map<2, 1>({out, dout}, {dinp}, n, [cap](D d, V y, V g) HWY_ATTR {
        const V t = hn::Div(y, hn::Set(d, cap));
        return hn::Mul(hn::NegMulAdd(t, t, hn::Set(d, 1.0f)), g);
    });
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(SwigluForward);
HWY_EXPORT(SwigluBackward);
HWY_EXPORT(Relu2Forward);
HWY_EXPORT(Relu2Backward);
HWY_EXPORT(SoftcapForward);
HWY_EXPORT(SoftcapBackward);

void swiglu_forward_kernel(float* out, const float* a, const float* b, size_t n) {
    HWY_DYNAMIC_DISPATCH(SwigluForward)(out, a, b, n);
}
void swiglu_backward_kernel(float* da, float* db, const float* a, const float* b, const float* dout,
                            size_t n) {
    HWY_DYNAMIC_DISPATCH(SwigluBackward)(da, db, a, b, dout, n);
}
void relu2_forward_kernel(float* out, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(Relu2Forward)(out, inp, n);
}
void relu2_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(Relu2Backward)(dinp, inp, dout, n);
}
void softcap_forward_kernel(float* out, const float* inp, size_t n, float cap) {
    HWY_DYNAMIC_DISPATCH(SoftcapForward)(out, inp, n, cap);
}
void softcap_backward_kernel(float* dinp, const float* out, const float* dout, size_t n,
                             float cap) {
    HWY_DYNAMIC_DISPATCH(SoftcapBackward)(dinp, out, dout, n, cap);
}

}  // namespace hg
#endif
