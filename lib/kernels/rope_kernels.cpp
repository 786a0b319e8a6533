// rope_kernels.cpp — Highway implementations of rope_kernels.h, compiled for every target by
// foreach_target.h. Whole vectors of pairs, then a scalar tail with the same expression.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/rope_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/rope_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sign = +1: the rotation by θ; -1: by -θ (x2·(-s) = -(x2·s) and a - (-b) = a + b exactly, so
// the inverse rounds as the twin's does).
HWY_INLINE void Rotate(float* x, const float* cos, const float* sin, size_t heads, size_t h,
                       float sign) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto vsign = hn::Set(d, sign);
    for (size_t j = 0; j < heads; j++, x += 2 * h) {
        float* x2p = x + h;  // the second half of the head
        size_t i = 0;
        for (; i + L <= h; i += L) {
            const auto c = hn::LoadU(d, cos + i);
            const auto s = hn::Mul(vsign, hn::LoadU(d, sin + i));
            const auto x1 = hn::LoadU(d, x + i), x2 = hn::LoadU(d, x2p + i);
            hn::StoreU(hn::Sub(hn::Mul(x1, c), hn::Mul(x2, s)), d, x + i);
            hn::StoreU(hn::Add(hn::Mul(x2, c), hn::Mul(x1, s)), d, x2p + i);
        }
        for (; i < h; i++) {
            const float c = cos[i], s = sign * sin[i];
            const float x1 = x[i], x2 = x2p[i];
            x[i] = x1 * c - x2 * s;
            x2p[i] = x2 * c + x1 * s;
        }
    }
}

void RopeRotate(float* x, const float* cos, const float* sin, size_t heads, size_t h) {
    Rotate(x, cos, sin, heads, h, 1.0f);
}
void RopeUnrotate(float* x, const float* cos, const float* sin, size_t heads, size_t h) {
    Rotate(x, cos, sin, heads, h, -1.0f);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(RopeRotate);
HWY_EXPORT(RopeUnrotate);

void rope_rotate_kernel(float* x, const float* cos, const float* sin, size_t heads, size_t h) {
    HWY_DYNAMIC_DISPATCH(RopeRotate)(x, cos, sin, heads, h);
}
void rope_unrotate_kernel(float* x, const float* cos, const float* sin, size_t heads, size_t h) {
    HWY_DYNAMIC_DISPATCH(RopeUnrotate)(x, cos, sin, heads, h);
}

}  // namespace hg
#endif
