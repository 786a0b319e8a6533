// bf16.cpp — Highway implementations of bf16_round and bf16_widen (bf16.h), compiled for every
// target by foreach_target.h. Integer operations only, so every target gives the twin's bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/bf16.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/bf16.h"

#include "lib/core/parallel.h"
#include "lib/kernels/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Bf16Round(bf16* out, const float* in, size_t n) { StoreBf16Run(hn::ScalableTag<float>(), in, out, n); }

void Bf16Widen(float* out, const bf16* in, size_t n) {
    const hn::ScalableTag<float> df;
    const size_t L = hn::Lanes(df);
    size_t i = 0;
    for (; i + L <= n; i += L) hn::StoreU(LoadBf16AsFloat(df, in + i), df, out + i);
    for (; i < n; i++) out[i] = bf16_to_float(in[i]);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(Bf16Round);
HWY_EXPORT(Bf16Widen);

void bf16_round(bf16* out, const float* in, size_t n) { HWY_DYNAMIC_DISPATCH(Bf16Round)(out, in, n); }
void bf16_widen(float* out, const bf16* in, size_t n) { HWY_DYNAMIC_DISPATCH(Bf16Widen)(out, in, n); }

void bf16_round_parallel(bf16* out, const float* in, size_t n) {
    constexpr size_t kPiece = size_t(1) << 14;  // numbers per piece of parallel work
    for_pieces(n, kPiece, 1, [&](size_t i0, size_t len) { bf16_round(out + i0, in + i0, len); });
}

}  // namespace hg
#endif
