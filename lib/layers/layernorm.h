// layernorm.h — LayerNorm over the last dimension C (eps 1e-5, biased variance, as PyTorch).
//
//   mean = Σ_c x_c / C,  rstd = 1 / sqrt(Σ_c (x_c - mean)² / C + eps)
//   out_c = (x_c - mean) · rstd · weight_c + bias_c
//
// N = B·T rows. mean (N) and rstd (N) are stored for the backward. bias may be null
// (no bias), and then dbias must be null too.
#pragma once
#include <cstddef>

namespace hg {

constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C);
// dinp (N,C) +=, dweight (C) +=, dbias (C) += (skipped when null).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);

template <typename real>
void layernorm_forward_scalar(real* out, real* mean, real* rstd, const real* inp,
                              const real* weight, const real* bias, int N, int C);
template <typename real>
void layernorm_backward_scalar(real* dinp, real* dweight, real* dbias, const real* dout,
                               const real* inp, const real* weight, const real* mean,
                               const real* rstd, int N, int C);

}  // namespace hg
