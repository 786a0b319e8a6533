// vec.cpp — Highway implementations of vec.h, compiled for every target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/vec.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/vec.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void VecAdd(float* out, const float* a, const float* b, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t i = 0;
    for (; i + L <= n; i += L) hn::StoreU(hn::Add(hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
    for (; i < n; i++) out[i] = a[i] + b[i];  // scalar tail (simd.h)
}

void VecAcc(float* out, const float* a, size_t n) { VecAdd(out, out, a, n); }

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(VecAdd);
HWY_EXPORT(VecAcc);

void vec_add(float* out, const float* a, const float* b, size_t n) {
    HWY_DYNAMIC_DISPATCH(VecAdd)(out, a, b, n);
}
void vec_acc(float* out, const float* a, size_t n) { HWY_DYNAMIC_DISPATCH(VecAcc)(out, a, n); }

}  // namespace hg
#endif
