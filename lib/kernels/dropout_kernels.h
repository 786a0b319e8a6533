// dropout_kernels.h — the multiply half of dropout (dynamic dispatch; see simd.h).
// lib/layers/dropout.cpp fills `mult` from the hash (scalar: 0 where dropped, 1/(1-p) where
// kept) and calls this, in both passes: the forward multiplies the input, the backward the
// gradient (dinp_i = dout_i · mult_i). Scalar twins: twin::dropout_forward /
// twin::dropout_backward in lib/layers/dropout.h. One IEEE multiply: bit-identical to them.
#pragma once
#include <cstddef>

namespace hg {

// out_i = inp_i · mult_i       (out may alias inp)
void dropout_mul_kernel(float* out, const float* inp, const float* mult, size_t n);

}  // namespace hg
