// adamw.h — the AdamW update of one contiguous parameter tensor: a Highway kernel
// (adamw.cpp, dynamic dispatch; see simd.h) and its plain-loop scalar twin.
//
// The rule and the reasons behind it are explained above adamw_step in lib/optim/adamw.h; this
// file is the arithmetic, written in the exact order PyTorch's AdamW (torch.optim.AdamW,
// single-tensor path) performs it, one IEEE operation at a time:
//
//   p ← p · (1 − lr·wd)                         param.mul_(1 - lr * weight_decay)
//   m ← β1·m + (1 − β1)·g                       first moment  (mean of g)
//   v ← β2·v + ((1 − β2)·g)·g                   exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)
//   denom = sqrt(v) / sqrt(bc2) + eps           (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
//   p ← p − (lr / bc1) · (m / denom)            param.addcdiv_(exp_avg, denom, -step_size)
//
// The per-call scalars (1 − lr·wd, 1 − β1, 1 − β2, lr/bc1, sqrt(bc2)) are computed in double
// and then rounded once, as PyTorch computes them in Python floats (adamw_scalars below).
// Every per-element operation is a separately rounded float operation (no fused
// multiply-add), so the Highway kernel and the float scalar twin agree bit for bit.
//
// g is first multiplied by grad_scale (one float multiply, g ← g·s): gradient clipping's
// factor, applied in this pass instead of a pass of its own over the gradient. The bits are
// those of clipping in place first (the same multiply); s = 1 leaves g exactly as it is.
//
// p16, when not null, receives the bf16 copy of each updated p (bf16_from_float, lib/kernels/bf16.h)
// in the same pass: mixed-precision training reads its weights as bf16, and the copy is made
// where the float weight is still in a register, not by a pass of its own. Weights, m and v stay
// float: an update is ~lr·|p| small, far under bf16's half ulp of 2⁻⁹·|p|, and would be lost
// if p itself were bf16.
//
// Known difference: PyTorch >= 2.0 writes the m update as exp_avg.lerp_(g, 1 − β1), i.e.
// m + (1 − β1)·(g − m), which can round differently in the last bit; we follow the formula
// above (also what PyTorch's fused CUDA AdamW computes).
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/kernels/bf16.h"

namespace hg {

// bias_correction1 = 1 − β1^step, bias_correction2 = 1 − β2^step (step 1-based).
void adamw_update(float* p,        // (n) parameters, updated in place
                  const float* g,  // (n) gradient
                  float* m,        // (n) first moment, updated in place
                  float* v,        // (n) second moment, updated in place
                  size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                  float bias_correction1, float bias_correction2, float grad_scale,
                  bf16* p16 = nullptr);  // (n) or null: the bf16 copy of p, written as p is

// The per-call constants of the update, computed in double (as PyTorch does in Python).
struct AdamWScalars {
    double decay;           // 1 − lr·wd
    double one_minus_beta1;  // 1 − β1
    double one_minus_beta2;  // 1 − β2
    double step_size;       // lr / bc1
    double bc2_sqrt;        // sqrt(bc2)
};
inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double weight_decay,
                                  double bias_correction1, double bias_correction2) {
    return {1.0 - lr * weight_decay, 1.0 - beta1, 1.0 - beta2, lr / bias_correction1,
            std::sqrt(bias_correction2)};
}

// The scalar twin: the same operations in the same order, in any number type.
template <typename real>
void adamw_update_scalar(real* p,        // (n)
                         const real* g,  // (n)
                         real* m,        // (n)
                         real* v,        // (n)
                         size_t n, real lr, real beta1, real beta2, real eps, real weight_decay,
                         real bias_correction1, real bias_correction2, real grad_scale,
                         bf16* p16 = nullptr) {
    const AdamWScalars k = adamw_scalars(lr, beta1, beta2, weight_decay, bias_correction1,
                                         bias_correction2);
    const real decay = real(k.decay), c1 = real(k.one_minus_beta1), c2 = real(k.one_minus_beta2);
    const real step_size = real(k.step_size), bc2_sqrt = real(k.bc2_sqrt);
    for (size_t i = 0; i < n; i++) {
        const real g_i = g[i] * grad_scale;
        p[i] = p[i] * decay;
        m[i] = beta1 * m[i] + c1 * g_i;
        v[i] = beta2 * v[i] + (c2 * g_i) * g_i;
        real denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] - step_size * (m[i] / denom);
        if (p16) p16[i] = bf16_from_float(float(p[i]));
    }
}

}  // namespace hg
