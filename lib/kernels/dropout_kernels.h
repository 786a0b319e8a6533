// dropout_kernels.h — the multiply half of dropout (dynamic dispatch; see simd.h).
// lib/layers/dropout.cpp fills `mult` from the hash (scalar: 0 where dropped, 1/(1-p) where
// kept) and calls these. Scalar twins: dropout_forward_scalar / dropout_backward_scalar in
// lib/layers/dropout.h. The forward is one IEEE multiply, bit-identical to the twin; the
// backward's dinp + dout·mult is fused (one rounding) on FMA targets, so it agrees with the
// twin (compiled for baseline x86-64: two roundings) to within one rounding.
#pragma once
#include <cstddef>

namespace hg {

// out_i = inp_i · mult_i       (out may alias inp)
void dropout_mul_kernel(float* out, const float* inp, const float* mult, size_t n);
// dinp_i += dout_i · mult_i
void dropout_mul_acc_kernel(float* dinp, const float* dout, const float* mult, size_t n);

}  // namespace hg
