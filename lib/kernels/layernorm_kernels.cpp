// layernorm_kernels.cpp — Highway implementations of layernorm_kernels.h, compiled for every
// target by foreach_target.h. Loops run whole vectors, then a scalar tail (no masked loads).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/layernorm_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <cmath>

#include "lib/kernels/layernorm_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void LayerNormForwardRow(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, float eps, size_t C) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);

    // mean: one vector of partial sums, reduced across lanes, plus the tail.
    auto vsum = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= C; i += L) vsum = hn::Add(vsum, hn::LoadU(d, inp + i));
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    for (; i < C; i++) sum += inp[i];
    const float m = sum / float(C);

    // variance, second pass over (x - mean)² (no cancellation, unlike Σx² - C·mean²).
    const auto vm = hn::Set(d, m);
    auto vsq = hn::Zero(d);
    for (i = 0; i + L <= C; i += L) {
        const auto xm = hn::Sub(hn::LoadU(d, inp + i), vm);
        vsq = hn::MulAdd(xm, xm, vsq);
    }
    float sq = hn::GetLane(hn::SumOfLanes(d, vsq));
    for (; i < C; i++) sq += (inp[i] - m) * (inp[i] - m);
    const float s = 1.0f / std::sqrt(sq / float(C) + eps);

    // out = x̂ · weight + bias
    const auto vs = hn::Set(d, s);
    for (i = 0; i + L <= C; i += L) {
        const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, inp + i), vm), vs);
        const auto b = bias ? hn::LoadU(d, bias + i) : hn::Zero(d);
        hn::StoreU(hn::MulAdd(xhat, hn::LoadU(d, weight + i), b), d, out + i);
    }
    for (; i < C; i++) out[i] = (inp[i] - m) * s * weight[i] + (bias ? bias[i] : 0.0f);
    *mean = m;
    *rstd = s;
}

void LayerNormBackwardRow(float* dinp, const float* dout, const float* inp, const float* weight,
                          float mean, float rstd, size_t C) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto vm = hn::Set(d, mean);
    const auto vs = hn::Set(d, rstd);

    // Σ g and Σ g·x̂ with g = dout·weight (the two row means of the three-term formula).
    auto vg = hn::Zero(d), vgx = hn::Zero(d);
    size_t i = 0;
    for (; i + L <= C; i += L) {
        const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, inp + i), vm), vs);
        const auto g = hn::Mul(hn::LoadU(d, dout + i), hn::LoadU(d, weight + i));
        vg = hn::Add(vg, g);
        vgx = hn::MulAdd(g, xhat, vgx);
    }
    float sum_g = hn::GetLane(hn::SumOfLanes(d, vg));
    float sum_gx = hn::GetLane(hn::SumOfLanes(d, vgx));
    for (; i < C; i++) {
        const float g = dout[i] * weight[i];
        sum_g += g;
        sum_gx += g * ((inp[i] - mean) * rstd);
    }
    const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);

    // dinp += rstd · (g - mean(g) - x̂ · mean(g⊙x̂))
    const auto vmg = hn::Set(d, mean_g), vmgx = hn::Set(d, mean_gx);
    for (i = 0; i + L <= C; i += L) {
        const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, inp + i), vm), vs);
        const auto g = hn::Mul(hn::LoadU(d, dout + i), hn::LoadU(d, weight + i));
        const auto t = hn::NegMulAdd(xhat, vmgx, hn::Sub(g, vmg));  // g - mean_g - x̂·mean_gx
        hn::StoreU(hn::MulAdd(vs, t, hn::LoadU(d, dinp + i)), d, dinp + i);
    }
    for (; i < C; i++) {
        const float xhat = (inp[i] - mean) * rstd;
        const float g = dout[i] * weight[i];
        dinp[i] += rstd * (g - mean_g - xhat * mean_gx);
    }
}

void LayerNormBackwardParams(float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* mean, const float* rstd, size_t N, size_t C, size_t c0,
                             size_t c1) {
    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    // Rows outer, columns inner: each row's slice [c0, c1) is contiguous, and the slice of
    // dweight/dbias being accumulated stays in L1 across rows.
    for (size_t n = 0; n < N; n++) {
        const float* dout_n = dout + n * C;
        const float* inp_n = inp + n * C;
        const float m = mean ? mean[n] : 0.0f;  // x - 0 is exact: x̂ = x·rstd, RMSNorm's
        const auto vm = hn::Set(d, m);
        const auto vs = hn::Set(d, rstd[n]);
        size_t c = c0;
        for (; c + L <= c1; c += L) {
            const auto dy = hn::LoadU(d, dout_n + c);
            const auto xhat = hn::Mul(hn::Sub(hn::LoadU(d, inp_n + c), vm), vs);
            hn::StoreU(hn::MulAdd(dy, xhat, hn::LoadU(d, dweight + c)), d, dweight + c);
            if (dbias) hn::StoreU(hn::Add(hn::LoadU(d, dbias + c), dy), d, dbias + c);
        }
        for (; c < c1; c++) {
            dweight[c] += dout_n[c] * ((inp_n[c] - m) * rstd[n]);
            if (dbias) dbias[c] += dout_n[c];
        }
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(LayerNormForwardRow);
HWY_EXPORT(LayerNormBackwardRow);
HWY_EXPORT(LayerNormBackwardParams);

void layernorm_forward_row(float* out, float* mean, float* rstd, const float* inp,
                           const float* weight, const float* bias, float eps, size_t C) {
    HWY_DYNAMIC_DISPATCH(LayerNormForwardRow)(out, mean, rstd, inp, weight, bias, eps, C);
}
void layernorm_backward_row(float* dinp, const float* dout, const float* inp,
                            const float* weight, float mean, float rstd, size_t C) {
    HWY_DYNAMIC_DISPATCH(LayerNormBackwardRow)(dinp, dout, inp, weight, mean, rstd, C);
}
void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp,
                               const float* mean, const float* rstd, size_t N, size_t C,
                               size_t c0, size_t c1) {
    HWY_DYNAMIC_DISPATCH(LayerNormBackwardParams)(dweight, dbias, dout, inp, mean, rstd, N, C, c0,
                                                  c1);
}

}  // namespace hg
#endif
