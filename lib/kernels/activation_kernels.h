// activation_kernels.h — Highway kernels for SwiGLU's gate, ReLU² and logit soft-capping
// (dynamic dispatch; see simd.h). The scalar twins are in lib/layers/swiglu.h, relu2.h and
// softcap.h; the layers' .cpp files split long arrays over threads.
//
// Every kernel goes through Map (map-inl.h): whole vectors, then the tail through a
// zero-padded buffer, so each element gets the same bits wherever it sits in the array.
// Outputs may alias inputs (each output element depends only on the inputs at its index).
#pragma once
#include <cstddef>

namespace hg {

// out_i = silu(a_i) · b_i,  silu(a) = a · σ(a)
void swiglu_forward_kernel(float* out, const float* a, const float* b, size_t n);
// da_i = dout_i · b_i · silu'(a_i),  db_i = dout_i · silu(a_i)
void swiglu_backward_kernel(float* da, float* db, const float* a, const float* b,
                            const float* dout, size_t n);

// out_i = max(x_i, 0)²
void relu2_forward_kernel(float* out, const float* inp, size_t n);
// dinp_i = 2 · max(x_i, 0) · dout_i
void relu2_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n);

// out_i = cap · tanh(z_i / cap)
void softcap_forward_kernel(float* out, const float* inp, size_t n, float cap);
// dinp_i = (1 - (y_i / cap)²) · dout_i, from the output y
void softcap_backward_kernel(float* dinp, const float* out, const float* dout, size_t n, float cap);

}  // namespace hg
