// softmax_kernels.cpp — Highway implementations of softmax_kernels.h, compiled for every
// target by foreach_target.h (the pattern of vec.cpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/softmax_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "lib/kernels/exp-inl.h"
#include "lib/kernels/softmax_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// max_i x_i (n >= 1).
float RowMax(const float* x, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t i = 0;
    float maxval = x[0];
    if (n >= L) {
        auto vmax = hn::LoadU(d, x);
        for (i = L; i + L <= n; i += L) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
        maxval = hn::GetLane(hn::MaxOfLanes(d, vmax));
    }
    for (; i < n; i++) maxval = std::max(maxval, x[i]);  // scalar tail (no masked loads)
    return maxval;
}

// out_i = exp(x_i - maxval); returns Σ_i out_i. out may alias x. Every exponent is ≤ 0 (exp-inl.h: 0
// below -126·ln 2, where the scalar tail's std::exp gives a subnormal instead).
float ExpMinusMax(float* out, const float* x, size_t n, float maxval) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto vmax = hn::Set(d, maxval);
    auto vsum = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= n; i += L) {
        const auto e = ExpFlushed(d, hn::Sub(hn::LoadU(d, x + i), vmax));
        hn::StoreU(e, d, out + i);
        vsum = hn::Add(vsum, e);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    for (; i < n; i++) {
        out[i] = std::exp(x[i] - maxval);
        sum += out[i];
    }
    return sum;
}

// x_i *= s
void ScaleInPlace(float* x, size_t n, float s) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto vs = hn::Set(d, s);
    size_t i = 0;
    for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
    for (; i < n; i++) x[i] *= s;
}

void SoftmaxRow(float* out, const float* inp, size_t n) {
    const float maxval = RowMax(inp, n);
    const float sum = ExpMinusMax(out, inp, n, maxval);  // >= 1: exp(0) of the max entry
    ScaleInPlace(out, n, 1.0f / sum);
}

float CrossentropyRow(float* probs, const float* logits, size_t n, int target) {
    const float x_target = target < 0 ? 0.0f : logits[target];
    const float maxval = RowMax(logits, n);
    const float sum = ExpMinusMax(probs, logits, n, maxval);
    ScaleInPlace(probs, n, 1.0f / sum);
    if (target < 0) return 0.0f;
    return std::log(sum) + (maxval - x_target);
}

void SoftmaxBackwardRow(float* dinp, const float* out, const float* dout, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    // dot = Σ out ⊙ dout, read completely before dinp (which may alias dout) is written.
    auto vdot = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= n; i += L)
        vdot = hn::MulAdd(hn::LoadU(d, out + i), hn::LoadU(d, dout + i), vdot);
    float dot = hn::GetLane(hn::SumOfLanes(d, vdot));
    for (; i < n; i++) dot += out[i] * dout[i];
    // dinp = out ⊙ (dout - dot)
    const auto vd = hn::Set(d, dot);
    for (i = 0; i + L <= n; i += L)
        hn::StoreU(hn::Mul(hn::LoadU(d, out + i), hn::Sub(hn::LoadU(d, dout + i), vd)), d,
                   dinp + i);
    for (; i < n; i++) dinp[i] = out[i] * (dout[i] - dot);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(SoftmaxRow);
HWY_EXPORT(CrossentropyRow);
HWY_EXPORT(SoftmaxBackwardRow);

void softmax_row(float* out, const float* inp, size_t n) {
    HWY_DYNAMIC_DISPATCH(SoftmaxRow)(out, inp, n);
}
float crossentropy_row(float* probs, const float* logits, size_t n, int target) {
    return HWY_DYNAMIC_DISPATCH(CrossentropyRow)(probs, logits, n, target);
}
void softmax_backward_row(float* dinp, const float* out, const float* dout, size_t n) {
    HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRow)(dinp, out, dout, n);
}

}  // namespace hg
#endif
