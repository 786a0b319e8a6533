// normal_kernels.cpp — Highway implementation of normal_kernels.h, compiled for every target by
// foreach_target.h.
//
// The uniforms come one at a time from the splitmix64 stream (64-bit multiplies, which not every
// target has in vector form), a block of kBlock pairs at a time; the costly part, a logarithm and
// a cosine per value, runs on whole vectors of doubles. A block shorter than kBlock is padded with
// the pair (u₁, u₂) = (1, 0), whose logarithm is finite, so every value goes through the same
// vector code wherever it sits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/normal_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>

#include "lib/kernels/normal_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Pairs drawn before the vector pass: a multiple of any target's lanes of doubles (SVE's 2048
// bits hold 32).
constexpr size_t kBlock = 64;

void NormalKernel(float* out, size_t n, const Rng& rng, double scale) {
    Rng r = rng;
    HWY_ALIGN double u1[kBlock], u2[kBlock], z[kBlock];
#if HWY_HAVE_FLOAT64
    const hn::ScalableTag<double> d;
    const size_t L = hn::Lanes(d);
#endif
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
        const size_t m = std::min(kBlock, n - i0);
        for (size_t j = 0; j < kBlock; j++) {
            // Rng::normal's two draws, in its order
            u1[j] = j < m ? 1.0 - r.uniform() : 1.0;
            u2[j] = j < m ? r.uniform() : 0.0;
        }
#if HWY_HAVE_FLOAT64
        for (size_t j = 0; j < kBlock; j += L) {
            const auto radius = hn::Sqrt(hn::Mul(hn::Set(d, -2.0), hn::Log(d, hn::Load(d, u1 + j))));
            const auto angle = hn::Mul(hn::Set(d, 2.0 * M_PI), hn::Load(d, u2 + j));
            hn::Store(hn::Mul(hn::Set(d, scale), hn::Mul(radius, hn::Cos(d, angle))), d, z + j);
        }
#else
        for (size_t j = 0; j < kBlock; j++) z[j] = scale * Rng::box_muller(u1[j], u2[j]);
#endif
        for (size_t j = 0; j < m; j++) out[i0 + j] = float(z[j]);
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(NormalKernel);

void normal_kernel(float* out, size_t n, const Rng& rng, double scale) {
    HWY_DYNAMIC_DISPATCH(NormalKernel)(out, n, rng, scale);
}

}  // namespace hg
#endif
