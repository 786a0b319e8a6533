// gelu.h — GELU, in both forms:
//   erf  (exact; PyTorch's default, nanoGPT, the course):  x · Φ(x) = x/2 · (1 + erf(x/√2))
//   tanh (GPT-2, llm.c):  x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
//
// The SIMD kernels (lib/kernels/gelu_kernels.cpp) use an exponential of our own
// (lib/kernels/exp-inl.h), and for the erf form their own erf (Highway 1.0.3 has none), accurate
// to about 1 float ulp; see there.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/errors.h"
#include "lib/kernels/bf16.h"

namespace hg {

enum class GeluKind { Erf, Tanh };  // the two forms above

// out (n), inp (n); out may alias inp. n == 0 (or a negative number cast to size_t) is hg::Error.
void gelu_forward(float* out, const float* inp, size_t n, GeluKind kind);
// dinp = gelu'(inp) ⊙ dout   (written, not added to: layers.h)
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind);

// The same with a bf16 copy for the next product (dtype bfloat16; lib/layers/linear.h), rounded
// as each vector is stored (beside a float dinp: piece by piece, while the piece is in cache),
// never in a pass of its own over memory:
//   gelu_forward_bf16   out16 = bf16(gelu(inp)); the float output is not written anywhere (the
//                       next product reads only out16, and the backward reads inp)
//   gelu_backward_bf16  dinp as gelu_backward, and dinp16 = bf16(dinp) beside it (the bias's
//                       gradient sums the float dinp); dinp may be null, for a product without
//                       a bias: then only dinp16 is written
// Their bits are gelu_forward's / gelu_backward's, rounded (bf16_from_float).
void gelu_forward_bf16(bf16* out16, const float* inp, size_t n, GeluKind kind);
void gelu_backward_bf16(float* dinp, bf16* dinp16, const float* inp, const float* dout, size_t n, GeluKind kind);

template <typename real>
void gelu_forward_twin(real* out, const real* inp, size_t n, GeluKind kind);
template <typename real>
void gelu_backward_twin(real* dinp, const real* inp, const real* dout, size_t n, GeluKind kind);

// ---------------------------------------------------------------------------------------------
// Scalar twins (reference math; the gradient checks run them in double).

constexpr double kInvSqrt2 = 0.70710678118654752440;      // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1/√(2π)
constexpr double kSqrt2OverPi = 0.79788456080286535588;   // √(2/π)
constexpr double kGeluCubic = 0.044715;                   // GPT-2's cubic coefficient

// n > 0, and not a negative int that was converted to size_t.
inline void gelu_check_n(const char* fn, size_t n) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
}

template <typename real>
void gelu_forward_twin(real* out,        // (n)
                       const real* inp,  // (n)
                       size_t n, GeluKind kind) {
    gelu_check_n("gelu_forward", n);
    for (size_t i = 0; i < n; i++) {
        const real x = inp[i];
        if (kind == GeluKind::Erf) {
            // Φ(x) = (1 + erf(x/√2))/2 = erfc(-x/√2)/2: erfc keeps full relative accuracy in
            // the left tail, where 1 + erf(x/√2) would cancel.
            out[i] = x * real(0.5) * std::erfc(-x * real(kInvSqrt2));
        } else {
            const real u = real(kSqrt2OverPi) * x * (real(1) + real(kGeluCubic) * x * x);
            out[i] = real(0.5) * x * (real(1) + std::tanh(u));
        }
    }
}

// GELU backward: elementwise, dinp_i = gelu'(x_i) · dout_i, with x = inp (n).
//
// Erf form.  gelu(x) = x · Φ(x), Φ the standard normal CDF, φ = Φ' its density:
//   gelu'(x) = Φ(x) + x · φ(x),   φ(x) = exp(-x²/2) / √(2π)                     (line E)
//
// Tanh form.  gelu(x) = x/2 · (1 + tanh(u)),  u = √(2/π) · (x + 0.044715 x³):
//   gelu'(x) = (1 + tanh u)/2                      (product rule: d/dx of x/2)
//            + x/2 · sech² u · du/dx               (d tanh(u)/du = 1 - tanh² u = sech² u)
//   du/dx    = √(2/π) · (1 + 3·0.044715 x²)                                     (line T)
// sech² u is computed as 1/cosh² u, not 1 - tanh² u: for |u| > ~4 tanh u rounds to within a few
// ulp of ±1, and 1 - tanh² u would keep only that rounding error. (llm.c also uses 1/cosh².)
//
// The two forms differ by up to ~1e-3 in gelu'; mixing them is a real bug, and the tests
// check that the gradient checker catches it.
template <typename real>
void gelu_backward_twin(real* dinp,        // (n)
                        const real* inp,   // (n)
                        const real* dout,  // (n)
                        size_t n, GeluKind kind) {
    gelu_check_n("gelu_backward", n);
    for (size_t i = 0; i < n; i++) {
        const real x = inp[i];
        real grad;
        if (kind == GeluKind::Erf) {
            const real cdf = real(0.5) * std::erfc(-x * real(kInvSqrt2));
            const real pdf = real(kInvSqrt2Pi) * std::exp(real(-0.5) * x * x);
            grad = cdf + x * pdf;                                                   // line E
        } else {
            const real u = real(kSqrt2OverPi) * x * (real(1) + real(kGeluCubic) * x * x);
            const real sech = real(1) / std::cosh(u);  // cosh overflows to inf: sech = 0, fine
            const real du = real(kSqrt2OverPi) * (real(1) + real(3 * kGeluCubic) * x * x);
            grad = real(0.5) * (real(1) + std::tanh(u)) + real(0.5) * x * sech * sech * du;  // T
        }
        dinp[i] = grad * dout[i];
    }
}

}  // namespace hg
