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
    for (; i < n; i++) out[i] = inp[i] * mult[i];  // scalar tail (no masked loads: STYLE.md)
}

void DropoutMulAcc(float* dinp, const float* dout, const float* mult, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    size_t i = 0;
    // MulAdd: one rounding on FMA targets. (Writing Mul then Add would not keep two roundings
    // anyway: GCC's default -ffp-contract=fast fuses them, and the scalar tail, on FMA targets.)
    for (; i + L <= n; i += L)
        hn::StoreU(hn::MulAdd(hn::LoadU(d, dout + i), hn::LoadU(d, mult + i), hn::LoadU(d, dinp + i)),
                   d, dinp + i);
    for (; i < n; i++) dinp[i] += dout[i] * mult[i];
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(DropoutMul);
HWY_EXPORT(DropoutMulAcc);

void dropout_mul_kernel(float* out, const float* inp, const float* mult, size_t n) {
    HWY_DYNAMIC_DISPATCH(DropoutMul)(out, inp, mult, n);
}
void dropout_mul_acc_kernel(float* dinp, const float* dout, const float* mult, size_t n) {
    HWY_DYNAMIC_DISPATCH(DropoutMulAcc)(dinp, dout, mult, n);
}

}  // namespace hg
#endif
