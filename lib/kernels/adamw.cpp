// adamw.cpp — Highway implementation of adamw_update (adamw.h), compiled for every target by
// foreach_target.h. Each operation mirrors one line of adamw_update_scalar, with no MulAdd,
// so both round identically (the tests demand bit equality on every target).
//
// No contraction: g++ defaults to -ffp-contract=fast even with -std=c++17, and then fuses
// a·b + c into one FMA wherever the target has it (AVX2, AVX-512, not SSE4). That rounds once
// instead of twice, so the AVX2 result would differ from SSE4's, from the scalar twin's and
// from PyTorch's. The pragma sits before every include so Highway's inlined ops share it.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/adamw.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include "lib/kernels/adamw.h"
#include "lib/kernels/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AdamWUpdate(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, float bias_correction1,
                 float bias_correction2, float grad_scale, bf16* p16) {
    const AdamWScalars k = adamw_scalars(lr, beta1, beta2, weight_decay, bias_correction1,
                                         bias_correction2);
    const float decay = float(k.decay), c1 = float(k.one_minus_beta1), c2 = float(k.one_minus_beta2);
    const float step_size = float(k.step_size), bc2_sqrt = float(k.bc2_sqrt);

    const hn::ScalableTag<float> d;
    const size_t L = hn::Lanes(d);
    const auto decay_v = hn::Set(d, decay), beta1_v = hn::Set(d, beta1), beta2_v = hn::Set(d, beta2);
    const auto c1_v = hn::Set(d, c1), c2_v = hn::Set(d, c2), eps_v = hn::Set(d, eps);
    const auto step_v = hn::Set(d, step_size), bc2_sqrt_v = hn::Set(d, bc2_sqrt);
    const auto scale_v = hn::Set(d, grad_scale);
    size_t i = 0;
    for (; i + L <= n; i += L) {
        const auto g_i = hn::Mul(hn::LoadU(d, g + i), scale_v);                            // g·s (clipping)
        auto p_i = hn::Mul(hn::LoadU(d, p + i), decay_v);                                   // p·(1 − lr·wd)
        auto m_i = hn::Add(hn::Mul(beta1_v, hn::LoadU(d, m + i)), hn::Mul(c1_v, g_i));    // β1·m + (1−β1)·g
        auto v_i = hn::Add(hn::Mul(beta2_v, hn::LoadU(d, v + i)), hn::Mul(hn::Mul(c2_v, g_i), g_i));
        const auto denom = hn::Add(hn::Div(hn::Sqrt(v_i), bc2_sqrt_v), eps_v);            // sqrt(v)/sqrt(bc2) + eps
        p_i = hn::Sub(p_i, hn::Mul(step_v, hn::Div(m_i, denom)));                          // p − (lr/bc1)·(m/denom)
        hn::StoreU(p_i, d, p + i);
        if (p16) StoreBf16(d, p_i, p16 + i);  // the weight's bf16 copy, from the register just stored
        hn::StoreU(m_i, d, m + i);
        hn::StoreU(v_i, d, v + i);
    }
    for (; i < n; i++) {  // scalar tail (simd.h), same operations
        const float g_i = g[i] * grad_scale;
        p[i] = p[i] * decay;
        m[i] = beta1 * m[i] + c1 * g_i;
        v[i] = beta2 * v[i] + (c2 * g_i) * g_i;
        const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] - step_size * (m[i] / denom);
        if (p16) p16[i] = bf16_from_float(p[i]);
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(AdamWUpdate);

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float bias_correction1,
                  float bias_correction2, float grad_scale, bf16* p16) {
    HWY_DYNAMIC_DISPATCH(AdamWUpdate)(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                      bias_correction1, bias_correction2, grad_scale, p16);
}

}  // namespace hg
#endif
