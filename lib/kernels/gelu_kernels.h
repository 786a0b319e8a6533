// gelu_kernels.h — Highway kernels for GELU, both forms (dynamic dispatch; see simd.h).
// Scalar twins: gelu_forward_twin / gelu_backward_twin in lib/layers/gelu.h.
// lib/layers/gelu.cpp splits long arrays over threads and picks the form.
#pragma once
#include <cstddef>

#include "lib/kernels/bf16.h"

namespace hg {

// out_i = x_i · Φ(x_i)                       (out may alias inp)
void gelu_erf_forward_kernel(float* out, const float* inp, size_t n);
// dinp_i = (Φ(x_i) + x_i·φ(x_i)) · dout_i
void gelu_erf_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n);
// out_i = x_i/2 · (1 + tanh(√(2/π)(x_i + 0.044715 x_i³)))   (out may alias inp)
void gelu_tanh_forward_kernel(float* out, const float* inp, size_t n);
// dinp_i = gelu_tanh'(x_i) · dout_i
void gelu_tanh_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n);

// The same four with the result rounded to bf16 (bf16_from_float of the float kernel's bits),
// stored from the vector: no float copy is written (dtype bfloat16, lib/layers/gelu.h).
void gelu_erf_forward_bf16_kernel(bf16* out16, const float* inp, size_t n);
void gelu_erf_backward_bf16_kernel(bf16* dinp16, const float* inp, const float* dout, size_t n);
void gelu_tanh_forward_bf16_kernel(bf16* out16, const float* inp, size_t n);
void gelu_tanh_backward_bf16_kernel(bf16* dinp16, const float* inp, const float* dout, size_t n);

// The kernels' standard normal CDF Φ(x) on its own, for the tests of its accuracy.
void normal_cdf_kernel(float* out, const float* inp, size_t n);

}  // namespace hg
