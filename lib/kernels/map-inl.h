// map-inl.h — the loop the elementwise Highway kernels share, included by a kernel file inside
// its per-target code (after <hwy/highway.h>; the guard below lets foreach_target.h include it
// once per target, as Highway's own -inl.h headers do).
//
// Map(in, out, n, f) applies f to n elements of kIn input arrays, one vector of each at a
// time, and stores kOut (1 or 2) output arrays:
//   kOut = 1:  y = f(d, x0, x1, ...)              x_k = the lanes of in[k] at i, y -> out[0]
//   kOut = 2:  f(d, x0, x1, ..., y0, y1)          y0, y1 (references) -> out[0], out[1]
// The vectors travel as separate arguments, never in an array or a struct: SVE's vectors have
// no size known to the compiler, and such types cannot be array elements or struct members.
// Whole vectors first; the last n mod Lanes elements are copied (a scalar loop) into
// zero-padded aligned buffers and run through the same f. So every element gets the same bits
// wherever it sits in the array, and no masked load is needed (a masked tail from an
// unaligned pointer is what this avoids). Each output element depends only on the input
// elements at its index, and all of a vector's inputs are loaded before its outputs are
// stored, so an output may alias an input (in-place kernels).
// MapToBf16(in, out16, n, f) is Map with one output, stored rounded to bf16 (StoreBf16, the
// scalar bf16_from_float's bits) straight from the vector: no float copy of it is written.
#if defined(HANDGRAD_KERNELS_MAP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_MAP_INL_H_
#undef HANDGRAD_KERNELS_MAP_INL_H_
#else
#define HANDGRAD_KERNELS_MAP_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <utility>

#include "lib/kernels/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One vector of every input at src[k], f, one vector of every output to dst[k]. The inputs are
// f's arguments, so all are loaded before any output is stored.
template <size_t kOut, class D, class F, size_t... I>
HWY_INLINE void MapStep(D d, const float* const* src, float* const* dst, F& f,
                        std::index_sequence<I...>) {
    static_assert(kOut == 1 || kOut == 2, "Map stores one or two output arrays");
    if constexpr (kOut == 1) {
        const auto y = f(d, hn::LoadU(d, src[I])...);
        hn::StoreU(y, d, dst[0]);
    } else {
        auto y0 = hn::Zero(d), y1 = hn::Zero(d);
        f(d, hn::LoadU(d, src[I])..., y0, y1);
        hn::StoreU(y0, d, dst[0]);
        hn::StoreU(y1, d, dst[1]);
    }
}

template <size_t kIn, size_t kOut, class F>
HWY_INLINE void Map(const float* const (&in)[kIn], float* const (&out)[kOut], size_t n, F f) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto inputs = std::make_index_sequence<kIn>();
    const float* src[kIn];
    float* dst[kOut];
    size_t i = 0;
    for (; i + L <= n; i += L) {
        for (size_t k = 0; k < kIn; k++) src[k] = in[k] + i;
        for (size_t k = 0; k < kOut; k++) dst[k] = out[k] + i;
        MapStep<kOut>(d, src, dst, f, inputs);
    }
    if (i == n) return;
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
    HWY_ALIGN float buf[kIn + kOut][kMaxLanes] = {};
    for (size_t k = 0; k < kIn; k++) {
        for (size_t j = 0; i + j < n; j++) buf[k][j] = in[k][i + j];
        src[k] = buf[k];
    }
    for (size_t k = 0; k < kOut; k++) dst[k] = buf[kIn + k];
    MapStep<kOut>(d, src, dst, f, inputs);
    for (size_t k = 0; k < kOut; k++) {
        for (size_t j = 0; i + j < n; j++) out[k][i + j] = buf[kIn + k][j];
    }
}

// One vector of every input at src[k], f, its result rounded to bf16 at dst.
template <class D, class F, size_t... I>
HWY_INLINE void MapStepBf16(D d, const float* const* src, bf16* dst, F& f, std::index_sequence<I...>) {
    StoreBf16(d, f(d, hn::LoadU(d, src[I])...), dst);
}

template <size_t kIn, class F>
HWY_INLINE void MapToBf16(const float* const (&in)[kIn], bf16* out16, size_t n, F f) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto inputs = std::make_index_sequence<kIn>();
    const float* src[kIn];
    size_t i = 0;
    for (; i + L <= n; i += L) {
        for (size_t k = 0; k < kIn; k++) src[k] = in[k] + i;
        MapStepBf16(d, src, out16 + i, f, inputs);
    }
    if (i == n) return;
    constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
    HWY_ALIGN float buf[kIn][kMaxLanes] = {};
    bf16 tail[kMaxLanes];
    for (size_t k = 0; k < kIn; k++) {
        for (size_t j = 0; i + j < n; j++) buf[k][j] = in[k][i + j];
        src[k] = buf[k];
    }
    MapStepBf16(d, src, tail, f, inputs);
    for (size_t j = 0; i + j < n; j++) out16[i + j] = tail[j];
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HANDGRAD_KERNELS_MAP_INL_H_
