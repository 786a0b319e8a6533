// qknorm.h — QK-norm: the gain-less RMSNorm (rmsnorm.h) of every head of q and of k, in place
// in the attention's qkv buffer, before the scores.
//
// qkv (B,T,3C) holds, for each position, q (C) then k (C) then v (C), each NH heads of
// hs = C/NH contiguous numbers (attention.h). For each position and each of the 2·NH slices
// x = q_h or k_h (hs numbers):
//   rstd = 1 / sqrt(Σ_i x_i² / hs + eps),   x ← x · rstd          (eps = kRmsNormEps)
// v is left as it is. rstd (B,T,2·NH) is stored, per position q's NH heads then k's.
//
// The score scale stays 1/√hs, so the attention layer is unchanged. With unit-RMS q and k,
// |q·k| ≤ hs (Cauchy-Schwarz), so every score lies in [-√hs, √hs] (±5.7 at hs = 32): the
// norm bounds how peaked a row of attention can get, and no logit can grow without bound
// with the weights. A larger fixed scale or a learned per-head gain would lift that bound;
// neither is needed for the norm itself.
//
// With rotary embeddings (rope.h): RoPE rotates pairs of numbers inside one head, an orthogonal
// map, so it keeps Σ_i x_i² and with it rstd: norm(R·x) = R·norm(x) exactly. Rotating first or
// normalising first is therefore the same function (they differ only in float rounding).
// handgrad rotates first, then normalises: then the buffer after both holds the normalised
// values themselves, and the gain-less norm's backward needs exactly those (x̂ is its output)
// and rstd, nothing else. Normalising first would leave R·x̂ in the buffer and the backward
// would have to rotate it back. So the order in a block is
//   forward:  qkv = ln_1 · Wᵀ;  rope_forward(qkv);  qknorm_forward(qkv);  attention(qkv)
//   backward: attention → dqkv;  qknorm_backward(dqkv);  rope_backward(dqkv);  linear
// and a reference implementation mirrors it (rotate, then normalise).
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"
#include "lib/layers/rmsnorm.h"

namespace hg {

// qkv (B,T,3C): q and k normalised per head in place; rstd (B,T,2·NH) written.
// Sizes <= 0 or C not divisible by NH are hg::Error.
void qknorm_forward(float* qkv, float* rstd, int B, int T, int C, int NH);
// dqkv (B,T,3C), in place: on entry dL/d(normalised q, k) and dL/dv; on return the q and k
// parts are overwritten with dL/d(q, k before the norm) and the v part is left as it is.
// qkv (B,T,3C) is the forward's output (the normalised q, k), rstd (B,T,2·NH) its rstd.
void qknorm_backward(float* dqkv, const float* qkv, const float* rstd, int B, int T, int C, int NH);

template <typename real>
void qknorm_forward_twin(real* qkv, real* rstd, int B, int T, int C, int NH);
template <typename real>
void qknorm_backward_twin(real* dqkv, const real* qkv, const real* rstd, int B, int T, int C,
                          int NH);

inline void qknorm_check_sizes(const char* fn, int B, int T, int C, int NH) {
    check(B > 0 && T > 0 && C > 0 && NH > 0,
          "{}: sizes must be positive (B = {}, T = {}, C = {}, NH = {})", fn, B, T, C, NH);
    check(C % NH == 0, "{}: n_embd (C = {}) must be divisible by n_head ({})", fn, C, NH);
}

// ---------------------------------------------------------------------------------------------
// Scalar twins (the gradient checks run them in double).

template <typename real>
void qknorm_forward_twin(real* qkv,   // (B, T, 3C)
                         real* rstd,  // (B, T, 2·NH)
                         int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_forward", B, T, C, NH);
    const int hs = C / NH;
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int j = 0; j < 2 * NH; j++) {  // q's heads, then k's: 2·NH slices of hs, contiguous
            real* x = qkv + bt * 3 * C + (size_t)j * hs;
            real sq = 0;
            for (int i = 0; i < hs; i++) sq += x[i] * x[i];
            const real s = real(1) / std::sqrt(sq / hs + real(kRmsNormEps));
            for (int i = 0; i < hs; i++) x[i] = x[i] * s;
            rstd[bt * 2 * NH + j] = s;
        }
}

// QK-norm backward: per slice, the gain-less RMSNorm backward (rmsnorm.h, line X with
// weight = 1, so g = dy) written in terms of the output y = x̂, which is what qkv holds:
//   dx = rstd · ( dy - y · mean(dy ⊙ y) )                                         (line X)
// mean(dy⊙y) is the row sum of line S. v is not normalised: its gradient passes unchanged.
template <typename real>
void qknorm_backward_twin(real* dqkv,        // (B, T, 3C)
                          const real* qkv,   // (B, T, 3C)
                          const real* rstd,  // (B, T, 2·NH)
                          int B, int T, int C, int NH) {
    qknorm_check_sizes("qknorm_backward", B, T, C, NH);
    const int hs = C / NH;
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int j = 0; j < 2 * NH; j++) {
            const size_t off = bt * 3 * C + (size_t)j * hs;
            const real* y = qkv + off;
            real* dy = dqkv + off;  // dy on entry, dx on return
            const real s = rstd[bt * 2 * NH + j];
            real sum = 0;
            for (int i = 0; i < hs; i++) sum += dy[i] * y[i];  // line S
            const real mean_dyy = sum / hs;
            for (int i = 0; i < hs; i++) dy[i] = s * (dy[i] - y[i] * mean_dyy);  // line X
        }
}

}  // namespace hg
