// linear.h — the affine map y = x·Wᵀ + b, with W stored [out, in] as PyTorch stores it.
//
// inp (N,C), weight (OC,C), bias (OC) or null, out (N,OC). Both passes are sgemm calls
// (lib/matmul.h); the backward accumulates (beta = 1):
//   dinp += dout · W,   dweight += doutᵀ · inp,   dbias += Σ_n dout[n]
#pragma once
#include <cstddef>

namespace hg {

void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC);
// dinp may be null (its gradient is not needed); dbias is null when there is no bias.
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC);

template <typename real>
void linear_forward_scalar(real* out, const real* inp, const real* weight, const real* bias,
                           int N, int C, int OC);
template <typename real>
void linear_backward_scalar(real* dinp, real* dweight, real* dbias, const real* dout,
                            const real* inp, const real* weight, int N, int C, int OC);

}  // namespace hg
