// residual.h — the residual stream's write: out = inp1 + inp2.
//
// Its backward has no function of its own. ∂out_i/∂inp1_i = ∂out_i/∂inp2_i = 1, so a sum
// passes dout unchanged to both terms; the model keeps one buffer dx for the stream's gradient
// and lets the LayerNorm that reads the stream add its part into it (layers.h), which is this
// backward without a copy.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/core/errors.h"

namespace hg {

// out (n), inp1 (n), inp2 (n); out may alias either input. n == 0 is hg::Error.
void residual_forward(float* out, const float* inp1, const float* inp2, size_t n);

template <typename real>
void residual_forward_twin(real* out, const real* inp1, const real* inp2, size_t n);

// ---------------------------------------------------------------------------------------------
// Scalar twins.

// n > 0, and not a negative int that was converted to size_t.
inline void residual_check_n(const char* fn, size_t n) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
}

template <typename real>
void residual_forward_twin(real* out,         // (n)
                           const real* inp1,  // (n)
                           const real* inp2,  // (n)
                           size_t n) {
    residual_check_n("residual_forward", n);
    for (size_t i = 0; i < n; i++) out[i] = inp1[i] + inp2[i];
}

}  // namespace hg
