// residual.h — the residual stream's write: out = inp1 + inp2; the gradient passes to both.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/errors.h"

namespace hg {

// out (n), inp1 (n), inp2 (n); out may alias either input. n == 0 is hg::Error.
void residual_forward(float* out, const float* inp1, const float* inp2, size_t n);
// dinp1 += dout, dinp2 += dout
void residual_backward(float* dinp1, float* dinp2, const float* dout, size_t n);

template <typename real>
void residual_forward_scalar(real* out, const real* inp1, const real* inp2, size_t n);
template <typename real>
void residual_backward_scalar(real* dinp1, real* dinp2, const real* dout, size_t n);

// ---------------------------------------------------------------------------------------------
// Scalar twins.

// n > 0, and not a negative int that was converted to size_t.
inline void residual_check_n(const char* fn, size_t n) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
}

template <typename real>
void residual_forward_scalar(real* out,         // (n)
                             const real* inp1,  // (n)
                             const real* inp2,  // (n)
                             size_t n) {
    residual_check_n("residual_forward", n);
    for (size_t i = 0; i < n; i++) out[i] = inp1[i] + inp2[i];
}

// Residual backward.  out = inp1 + inp2, all (n), so ∂out_i/∂inp1_i = ∂out_i/∂inp2_i = 1:
// the upstream gradient is copied unchanged into both branches (added, as every gradient is):
//   dinp1 += dout,  dinp2 += dout
// This is why the residual stream carries gradient straight from the loss to every block.
template <typename real>
void residual_backward_scalar(real* dinp1,       // (n)
                              real* dinp2,       // (n)
                              const real* dout,  // (n)
                              size_t n) {
    residual_check_n("residual_backward", n);
    for (size_t i = 0; i < n; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}

}  // namespace hg
