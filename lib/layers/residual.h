// residual.h — the residual stream's write: out = inp1 + inp2; the gradient passes to both.
#pragma once
#include <cstddef>

namespace hg {

void residual_forward(float* out, const float* inp1, const float* inp2, size_t n);
// dinp1 += dout, dinp2 += dout
void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t n);

template <typename real>
void residual_forward_scalar(real* out, const real* inp1, const real* inp2, size_t n);
template <typename real>
void residual_backward_scalar(real* dinp1, real* dinp2, const real* dout, size_t n);

}  // namespace hg
