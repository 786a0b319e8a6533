// map-inl.h — the loop the elementwise Highway kernels share, included by a kernel file inside
// its per-target code (after <hwy/highway.h>; the guard below lets foreach_target.h include it
// once per target, as Highway's own -inl.h headers do).
//
// Map<kIn, kOut>(in, out, n, f) applies f to n elements of kIn input arrays, one vector of
// each at a time, and stores kOut output arrays:
//   f(d, x, y)   x[k] = the lanes of in[k] at i,  y[k] -> the lanes of out[k] at i
// Whole vectors first; the last n mod Lanes elements are copied (a scalar loop) into
// zero-padded aligned buffers and run through the same f. So every element gets the same bits
// wherever it sits in the array, and no masked load is needed (a masked tail from an
// unaligned pointer is what this avoids). Each output element depends only on the input
// elements at its index, and all of a vector's inputs are loaded before its outputs are
// stored, so an output may alias an input (in-place kernels).
#if defined(HANDGRAD_KERNELS_MAP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_MAP_INL_H_
#undef HANDGRAD_KERNELS_MAP_INL_H_
#else
#define HANDGRAD_KERNELS_MAP_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <size_t kIn, size_t kOut, class F>
HWY_INLINE void Map(const float* const (&in)[kIn], float* const (&out)[kOut], size_t n, F f) {
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    const size_t L = hn::Lanes(d);
    V x[kIn], y[kOut];
    size_t i = 0;
    for (; i + L <= n; i += L) {
        for (size_t k = 0; k < kIn; k++) x[k] = hn::LoadU(d, in[k] + i);
        f(d, x, y);
        for (size_t k = 0; k < kOut; k++) hn::StoreU(y[k], d, out[k] + i);
    }
    if (i == n) return;
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
    HWY_ALIGN float buf[kIn + kOut][kMaxLanes] = {};
    for (size_t k = 0; k < kIn; k++) {
        for (size_t j = 0; i + j < n; j++) buf[k][j] = in[k][i + j];
        x[k] = hn::Load(d, buf[k]);
    }
    f(d, x, y);
    for (size_t k = 0; k < kOut; k++) {
        hn::Store(y[k], d, buf[kIn + k]);
        for (size_t j = 0; i + j < n; j++) out[k][i + j] = buf[kIn + k][j];
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HANDGRAD_KERNELS_MAP_INL_H_
