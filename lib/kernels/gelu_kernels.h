// gelu_kernels.h — Highway kernels for GELU, both forms (dynamic dispatch; see simd.h).
// Scalar twins: gelu_forward_twin / gelu_backward_twin in lib/layers/gelu.h.
// lib/layers/gelu.cpp splits long arrays over threads and picks the form.
#pragma once
#include <cstddef>

namespace hg {

// out_i = x_i · Φ(x_i)                       (out may alias inp)
void gelu_erf_forward_kernel(float* out, const float* inp, size_t n);
// dinp_i = (Φ(x_i) + x_i·φ(x_i)) · dout_i
void gelu_erf_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n);
// out_i = x_i/2 · (1 + tanh(√(2/π)(x_i + 0.044715 x_i³)))   (out may alias inp)
void gelu_tanh_forward_kernel(float* out, const float* inp, size_t n);
// dinp_i = gelu_tanh'(x_i) · dout_i
void gelu_tanh_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n);

// The kernels' standard normal CDF Φ(x) on its own, for the tests of its accuracy.
void normal_cdf_kernel(float* out, const float* inp, size_t n);

}  // namespace hg
