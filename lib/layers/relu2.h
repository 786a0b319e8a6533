// relu2.h — the squared ReLU (So et al. 2021, "Primer"), an MLP activation in place of GELU
// (same two matrices and width 4C):
//
//   out = relu(x)² = max(x, 0)²
//
// It is zero for x <= 0 and grows quadratically above; its derivative 2·max(x, 0) is
// continuous (0 at x = 0 from both sides), its second derivative is not (0, then 2).
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/core/errors.h"

namespace hg {

// out (n), inp (n); out may alias inp. n == 0 (or a negative number cast to size_t) is hg::Error.
void relu2_forward(float* out, const float* inp, size_t n);
// dinp (n) written (=) 2·relu(inp) ⊙ dout; dinp may alias dout.
void relu2_backward(float* dinp, const float* inp, const float* dout, size_t n);

template <typename real>
void relu2_forward_twin(real* out, const real* inp, size_t n);
template <typename real>
void relu2_backward_twin(real* dinp, const real* inp, const real* dout, size_t n);

// n > 0, and not a negative int that was converted to size_t.
inline void relu2_check_n(const char* fn, size_t n) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
}

// ---------------------------------------------------------------------------------------------
// Scalar twins (the gradient checks run them in double).

template <typename real>
void relu2_forward_twin(real* out,        // (n)
                        const real* inp,  // (n)
                        size_t n) {
    relu2_check_n("relu2_forward", n);
    for (size_t i = 0; i < n; i++) {
        const real r = inp[i] > real(0) ? inp[i] : real(0);
        out[i] = r * r;
    }
}

// ReLU² backward, elementwise: out = r², r = max(x, 0), and dr/dx = 1 for x > 0, 0 for x < 0:
//   dinp_i = 2 · r_i · dr/dx · dout_i = 2 · max(x_i, 0) · dout_i                    (line R)
// (at x = 0 both one-sided derivatives of r² are 0, so the kink of relu does not matter).
template <typename real>
void relu2_backward_twin(real* dinp,        // (n)
                         const real* inp,   // (n)
                         const real* dout,  // (n)
                         size_t n) {
    relu2_check_n("relu2_backward", n);
    for (size_t i = 0; i < n; i++) {
        const real r = inp[i] > real(0) ? inp[i] : real(0);
        dinp[i] = real(2) * r * dout[i];                                             // line R
    }
}

}  // namespace hg
