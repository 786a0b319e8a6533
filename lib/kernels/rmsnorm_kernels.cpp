// rmsnorm_kernels.cpp — Highway implementations of rmsnorm_kernels.h, compiled for every
// target by foreach_target.h. Loops run whole vectors, then a scalar tail (no masked loads).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/rmsnorm_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <cmath>

#include "lib/kernels/rmsnorm_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNormForwardRows(float* out, float* rstd, const float* inp, const float* weight, float eps,
                        size_t rows, size_t C) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    for (size_t r = 0; r < rows; r++, inp += C, out += C) {
        // Σ x²: one vector of partial sums, reduced across lanes, plus the tail.
        auto vsq = hn::Zero(d);
        size_t i = 0;
        for (; i + L <= C; i += L) {
            const auto x = hn::LoadU(d, inp + i);
            vsq = hn::MulAdd(x, x, vsq);
        }
        float sq = hn::GetLane(hn::SumOfLanes(d, vsq));
        for (; i < C; i++) sq += inp[i] * inp[i];
        const float s = 1.0f / std::sqrt(sq / float(C) + eps);

        // out = x · rstd · weight
        const auto vs = hn::Set(d, s);
        for (i = 0; i + L <= C; i += L) {
            const auto xhat = hn::Mul(hn::LoadU(d, inp + i), vs);
            hn::StoreU(weight ? hn::Mul(xhat, hn::LoadU(d, weight + i)) : xhat, d, out + i);
        }
        for (; i < C; i++) out[i] = inp[i] * s * (weight ? weight[i] : 1.0f);
        rstd[r] = s;
    }
}

// One row of dinp (+= when kAdd, = otherwise) rstd·(g - x̂·mean(g⊙x̂)) with g = dout⊙weight
// (dout when weight is null) and x̂ = src·src_scale: src = inp and src_scale = rstd for the
// normal backward, src = out and src_scale = 1 for the gain-less form from its output.
template <bool kAdd>
HWY_INLINE void RmsNormBackwardRow(float* dinp, const float* dout, const float* src,
                                   float src_scale, const float* weight, float rstd, size_t C) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto vsrc = hn::Set(d, src_scale);
    const auto vs = hn::Set(d, rstd);

    // Σ g·x̂, the row sum of the one-term projection
    auto vgx = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= C; i += L) {
        const auto xhat = hn::Mul(hn::LoadU(d, src + i), vsrc);
        auto g = hn::LoadU(d, dout + i);
        if (weight) g = hn::Mul(g, hn::LoadU(d, weight + i));
        vgx = hn::MulAdd(g, xhat, vgx);
    }
    float sum_gx = hn::GetLane(hn::SumOfLanes(d, vgx));
    for (; i < C; i++) sum_gx += dout[i] * (weight ? weight[i] : 1.0f) * (src[i] * src_scale);
    const float mean_gx = sum_gx / float(C);

    // dinp (+)= rstd · (g - x̂ · mean(g⊙x̂)); dout[i] is read before dinp[i] is stored, so the
    // two may be one buffer
    const auto vmgx = hn::Set(d, mean_gx);
    for (i = 0; i + L <= C; i += L) {
        const auto xhat = hn::Mul(hn::LoadU(d, src + i), vsrc);
        auto g = hn::LoadU(d, dout + i);
        if (weight) g = hn::Mul(g, hn::LoadU(d, weight + i));
        const auto t = hn::NegMulAdd(xhat, vmgx, g);  // g - x̂·mean_gx
        hn::StoreU(kAdd ? hn::MulAdd(vs, t, hn::LoadU(d, dinp + i)) : hn::Mul(vs, t), d, dinp + i);
    }
    for (; i < C; i++) {
        const float xhat = src[i] * src_scale;
        const float g = dout[i] * (weight ? weight[i] : 1.0f);
        const float dx = rstd * (g - xhat * mean_gx);
        dinp[i] = kAdd ? dinp[i] + dx : dx;
    }
}

void RmsNormBackwardRows(float* dinp, const float* dout, const float* inp, const float* weight,
                         const float* rstd, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) {
        const size_t off = r * C;
        RmsNormBackwardRow<true>(dinp + off, dout + off, inp + off, rstd[r], weight, rstd[r], C);
    }
}

void RmsNormBackwardFromOutputRows(float* dinp, const float* dout, const float* out,
                                   const float* rstd, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) {
        const size_t off = r * C;
        RmsNormBackwardRow<false>(dinp + off, dout + off, out + off, 1.0f, nullptr, rstd[r], C);
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(RmsNormForwardRows);
HWY_EXPORT(RmsNormBackwardRows);
HWY_EXPORT(RmsNormBackwardFromOutputRows);

void rmsnorm_forward_rows(float* out, float* rstd, const float* inp, const float* weight, float eps,
                          size_t rows, size_t C) {
    HWY_DYNAMIC_DISPATCH(RmsNormForwardRows)(out, rstd, inp, weight, eps, rows, C);
}
void rmsnorm_backward_rows(float* dinp, const float* dout, const float* inp, const float* weight,
                           const float* rstd, size_t rows, size_t C) {
    HWY_DYNAMIC_DISPATCH(RmsNormBackwardRows)(dinp, dout, inp, weight, rstd, rows, C);
}
void rmsnorm_backward_from_output_rows(float* dinp, const float* dout, const float* out,
                                       const float* rstd, size_t rows, size_t C) {
    HWY_DYNAMIC_DISPATCH(RmsNormBackwardFromOutputRows)(dinp, dout, out, rstd, rows, C);
}

}  // namespace hg
#endif
