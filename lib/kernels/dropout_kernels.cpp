// dropout_kernels.cpp — Highway implementations of dropout_kernels.h, compiled for every
// target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/dropout_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/dropout_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void DropoutMul(float* out, const float* inp, const float* mult, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t i = 0;
    for (; i + L <= n; i += L)
        hn::StoreU(hn::Mul(hn::LoadU(d, inp + i), hn::LoadU(d, mult + i)), d, out + i);
    for (; i < n; i++) out[i] = inp[i] * mult[i];  // scalar tail (simd.h)
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(DropoutMul);

void dropout_mul_kernel(float* out, const float* inp, const float* mult, size_t n) {
    HWY_DYNAMIC_DISPATCH(DropoutMul)(out, inp, mult, n);
}

}  // namespace hg
#endif
