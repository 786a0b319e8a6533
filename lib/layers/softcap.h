// softcap.h — logit soft-capping: squash every logit smoothly into (-S, S) before the loss.
//
//   out = S · tanh(z / S)          S > 0, the cap
//
// Near 0 it is the identity (tanh u ≈ u), so a model whose logits stay well inside ±S is not
// changed, while no logit can exceed S in size however large the weights grow. S = 0 means
// "no cap": the caller skips the layer then (this layer rejects S <= 0).
//
// With cross-entropy: the cap sits between the unembedding and the loss, z = x·W_lmᵀ,
// logits = S·tanh(z/S), loss = CE(softmax(logits)). The loss sees only capped logits, so the
// ratio of two probabilities is at most e^(2S) and the loss of any target at most
// 2S + ln V; at initialisation (z ≈ 0) the loss is still ≈ ln V. Backward, cross-entropy
// writes dlogits = probs - onehot as before, and softcap_backward maps it, in place, to dz,
// which then goes to the unembedding's backward. Sampling must apply the same cap to the
// logits it draws from.
//
// The backward reads the forward's output, not its input, so the forward can run in place
// on the logits buffer (no second (N, V) array): sech²(z/S) = 1 - tanh²(z/S) = 1 - (y/S)².
// Where the cap saturates (|z| > ~4S) that difference keeps an absolute error of a few ulps
// of 1 (the float output's own rounding, squared into t²), so dz is off by a few 1e-7·|dout|
// in float rather than by a few ulps of dz; the gradient there is tiny anyway, and the error
// is the size of the rounding in dlogits itself.
#pragma once
#include <cmath>
#include <cstddef>

#include <cstdint>

#include "lib/core/errors.h"

namespace hg {

// out (n) = cap·tanh(inp/cap); out may alias inp. n == 0 or cap not a finite number > 0 is
// hg::Error.
void softcap_forward(float* out, const float* inp, size_t n, float cap);
// dinp (n) written (=) (1 - (out/cap)²) ⊙ dout, from the forward's output; dinp may alias dout.
void softcap_backward(float* dinp, const float* out, const float* dout, size_t n, float cap);

template <typename real>
void softcap_forward_twin(real* out, const real* inp, size_t n, real cap);
template <typename real>
void softcap_backward_twin(real* dinp, const real* out, const real* dout, size_t n, real cap);

template <typename real>
void softcap_check(const char* fn, size_t n, real cap) {
    check(n > 0 && n <= size_t(PTRDIFF_MAX), "{}: n ({}) must be positive", fn, std::ptrdiff_t(n));
    check(std::isfinite(double(cap)) && cap > real(0),
          "{}: the logit cap must be a number > 0 (cap = {}; 0 means no cap, and then the layer "
          "is not run)", fn, double(cap));
}

// ---------------------------------------------------------------------------------------------
// Scalar twins (the gradient checks run them in double).

template <typename real>
void softcap_forward_twin(real* out,        // (n)
                          const real* inp,  // (n)
                          size_t n, real cap) {
    softcap_check("softcap_forward", n, cap);
    for (size_t i = 0; i < n; i++) out[i] = cap * std::tanh(inp[i] / cap);
}

// Soft-cap backward, elementwise: y = S·tanh(u), u = z/S, and tanh' = sech² = 1 - tanh²:
//   dz_i = S · sech²(u_i) · (1/S) · dy_i = sech²(z_i/S) · dy_i                       (line C)
// The S of the forward and the 1/S of du/dz cancel. With t = y/S = tanh(u), sech² u = 1 - t²,
// so the output alone gives the derivative.
template <typename real>
void softcap_backward_twin(real* dinp,        // (n)
                           const real* out,   // (n)
                           const real* dout,  // (n)
                           size_t n, real cap) {
    softcap_check("softcap_backward", n, cap);
    for (size_t i = 0; i < n; i++) {
        const real t = out[i] / cap;
        dinp[i] = (real(1) - t * t) * dout[i];                                       // line C
    }
}

}  // namespace hg
