// activation_kernels.cpp — Highway implementations of activation_kernels.h, compiled for every
// target by foreach_target.h.
//
// σ(a) through one exponential that never overflows: with e = exp(-|a|) in (0, 1] and
// r = 1/(1 + e),
//   σ(a) = r for a >= 0, e·r for a < 0;   1 - σ(a) = σ(-a) = e·r for a >= 0, r for a < 0
// both quotients, so neither cancels (1 - σ(a) computed as a difference would keep only
// rounding error for a > ~17). hwy's Exp is within 1 ulp and returns 0 below -104.
// tanh for the soft-cap is hwy's Tanh (within 4 ulp, exact ±1 past |x| = 18.7).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/activation_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "lib/kernels/activation_kernels.h"
#include "lib/kernels/map-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

struct Sigmoid {
    V sigma;      // σ(a)
    V one_minus;  // 1 - σ(a)
};
HWY_INLINE Sigmoid SigmoidOf(D d, V a) {
    const V e = hn::Exp(d, hn::Neg(hn::Abs(a)));
    const V r = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
    const V er = hn::Mul(e, r);
    const auto neg = hn::Lt(a, hn::Zero(d));
    return {hn::IfThenElse(neg, er, r), hn::IfThenElse(neg, r, er)};
}

void SwigluForward(float* out, const float* a, const float* b, size_t n) {
    Map<2, 1>({a, b}, {out}, n, [](D d, const V* x, V* y) HWY_ATTR {
        y[0] = hn::Mul(hn::Mul(x[0], SigmoidOf(d, x[0]).sigma), x[1]);  // a·σ(a)·b
    });
}

// silu'(a) = σ(a) · (1 + a · (1 - σ(a)))
void SwigluBackward(float* da, float* db, const float* a, const float* b, const float* dout,
                    size_t n) {
    Map<3, 2>({a, b, dout}, {da, db}, n, [](D d, const V* x, V* y) HWY_ATTR {
        const Sigmoid s = SigmoidOf(d, x[0]);
        const V dsilu = hn::Mul(s.sigma, hn::MulAdd(x[0], s.one_minus, hn::Set(d, 1.0f)));
        y[0] = hn::Mul(hn::Mul(x[2], x[1]), dsilu);    // dout·b·silu'(a)
        y[1] = hn::Mul(x[2], hn::Mul(x[0], s.sigma));  // dout·silu(a)
    });
}

void Relu2Forward(float* out, const float* inp, size_t n) {
    Map<1, 1>({inp}, {out}, n, [](D d, const V* x, V* y) HWY_ATTR {
        const V r = hn::Max(x[0], hn::Zero(d));
        y[0] = hn::Mul(r, r);
    });
}

void Relu2Backward(float* dinp, const float* inp, const float* dout, size_t n) {
    Map<2, 1>({inp, dout}, {dinp}, n, [](D d, const V* x, V* y) HWY_ATTR {
        const V r = hn::Max(x[0], hn::Zero(d));
        y[0] = hn::Mul(hn::Mul(hn::Set(d, 2.0f), r), x[1]);  // (2·relu(x))·dout
    });
}

void SoftcapForward(float* out, const float* inp, size_t n, float cap) {
    Map<1, 1>({inp}, {out}, n, [cap](D d, const V* x, V* y) HWY_ATTR {
        const V vcap = hn::Set(d, cap);
        y[0] = hn::Mul(vcap, hn::Tanh(d, hn::Div(x[0], vcap)));
    });
}

// sech²(z/cap) = 1 - t², t = y/cap = tanh(z/cap)
void SoftcapBackward(float* dinp, const float* out, const float* dout, size_t n, float cap) {
    Map<2, 1>({out, dout}, {dinp}, n, [cap](D d, const V* x, V* y) HWY_ATTR {
        const V t = hn::Div(x[0], hn::Set(d, cap));
        y[0] = hn::Mul(hn::NegMulAdd(t, t, hn::Set(d, 1.0f)), x[1]);
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
