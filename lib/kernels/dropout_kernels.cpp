// dropout_kernels.cpp — Highway implementation of dropout_kernels.h, compiled for every
// target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/dropout_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/dropout-inl.h"
#include "lib/kernels/dropout_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out = dropout(inp) for elements i0 .. i0+n; out2 = dropout(inp2) with the same mask when out2
// is not null: one hash for both (dropout-inl.h).
void DropoutApply(float* out, const float* inp, float* out2, const float* inp2, size_t n, float p, uint64_t key,
                  size_t i0) {
    const Dropout drop{p, key};
    const hn::ScalableTag<float> df;
    const size_t L = hn::Lanes(df);
    const KeepLanes keep(drop, i0);
    const auto vscale = hn::Set(df, drop.scale());
    size_t j = 0;
    for (; j + L <= n; j += L) {
        const auto kept = keep.at(df, j);
        hn::StoreU(hn::IfThenElseZero(kept, hn::Mul(hn::LoadU(df, inp + j), vscale)), df, out + j);
        if (out2) hn::StoreU(hn::IfThenElseZero(kept, hn::Mul(hn::LoadU(df, inp2 + j), vscale)), df, out2 + j);
    }
    for (; j < n; j++) {  // scalar tail (simd.h)
        out[j] = drop.apply(inp[j], i0 + j);
        if (out2) out2[j] = drop.apply(inp2[j], i0 + j);
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(DropoutApply);

void dropout_apply_kernel(float* out, const float* inp, size_t n, const Dropout& drop, size_t i0) {
    HWY_DYNAMIC_DISPATCH(DropoutApply)(out, inp, nullptr, nullptr, n, drop.p, drop.key, i0);
}

void dropout_apply2_kernel(float* out, const float* inp, float* out2, const float* inp2, size_t n,
                           const Dropout& drop, size_t i0) {
    HWY_DYNAMIC_DISPATCH(DropoutApply)(out, inp, out2, inp2, n, drop.p, drop.key, i0);
}

}  // namespace hg
#endif
