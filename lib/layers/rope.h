// rope.h — rotary position embeddings (RoPE; Su et al., RoFormer, 2021) on q and k, in place in
// the attention's qkv buffer.
//
// qkv (B,T,3C) holds, for each position, q (C) then k (C) then v (C), each NH heads of
// hs = C/NH contiguous numbers (attention.h); hs must be even. Each head is split into halves,
// and pair i couples x_i with x_{i+h}, h = hs/2. At position t pair i turns by the angle
//   θ_{t,i} = t · base^(-2i/hs),   i = 0 .. h-1                 (base 10000 by default)
//   y_i     = x_i · cos θ - x_{i+h} · sin θ
//   y_{i+h} = x_{i+h} · cos θ + x_i · sin θ
// for every head of q and of k, with the same angles for all heads; v is left as it is.
// Rotating q_t by θ_t and k_s by θ_s makes each pair's contribution to q_t·k_s depend on the
// positions only through t - s (a rotation by θ_t, then back by θ_s): the scores see relative
// positions, and no position table is added to the embeddings.
//
// Pairing: half-split (i, i+h), as GPT-NeoX and Hugging Face's Llama (`rotate_half`) do. The
// RoFormer paper and Meta's original Llama code pair neighbours (2i, 2i+1) instead: the same
// rotations on a permuted basis of each head, so weights trained with one do not fit the
// other, and a reference implementation must pair as here. Half-split is chosen because both
// halves are contiguous: a vector holds lanes i .. i+L of each half, and the rotation is
// lane-wise products with no shuffles.
//
// The table: cos and sin (maxT, h), built once by rope_table before the first step. The angles
// and their cos/sin are computed in double and rounded once to the number type, so a float64
// reference that casts its table to float32 gets the very same float table.
//
// The backward needs no stored activation: the layer is linear in x with a Jacobian that
// depends only on t. The attention that follows reads the rotated q, k, which is what the
// in-place forward leaves in qkv.
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"

namespace hg {

constexpr double kRopeBase = 10000.0;

// cos, sin (maxT, hs/2): cos θ_{t,i}, sin θ_{t,i} with θ_{t,i} = t · base^(-2i/hs).
// maxT <= 0, hs <= 0 or odd, or base not a finite number > 1 are hg::Error.
template <typename real>
void rope_table(real* cos, real* sin, int maxT, int hs, double base = kRopeBase);

// qkv (B,T,3C): q and k rotated in place, v untouched; cos, sin (>= T, hs/2) from rope_table.
// Sizes <= 0, C not divisible by NH, or an odd head size are hg::Error.
void rope_forward(float* qkv, const float* cos, const float* sin, int B, int T, int C, int NH);
// dqkv (B,T,3C), in place: on entry dL/d(rotated q, k) and dL/dv; on return the q and k parts
// are overwritten with dL/d(q, k before the rotation) and the v part is left as it is.
void rope_backward(float* dqkv, const float* cos, const float* sin, int B, int T, int C, int NH);

template <typename real>
void rope_forward_twin(real* qkv, const real* cos, const real* sin, int B, int T, int C, int NH);
template <typename real>
void rope_backward_twin(real* dqkv, const real* cos, const real* sin, int B, int T, int C,
                        int NH);

inline void rope_check_sizes(const char* fn, int B, int T, int C, int NH) {
    check(B > 0 && T > 0 && C > 0 && NH > 0,
          "{}: sizes must be positive (B = {}, T = {}, C = {}, NH = {})", fn, B, T, C, NH);
    check(C % NH == 0, "{}: n_embd (C = {}) must be divisible by n_head ({})", fn, C, NH);
    check((C / NH) % 2 == 0, "{}: rotary embeddings need an even head size (C / NH = {})", fn,
          C / NH);
}

// ---------------------------------------------------------------------------------------------
// The table and the scalar twins (the gradient checks run them in double).

template <typename real>
void rope_table(real* cos,  // (maxT, hs/2)
                real* sin,  // (maxT, hs/2)
                int maxT, int hs, double base) {
    check(maxT > 0, "rope_table: maxT must be positive (maxT = {})", maxT);
    check(hs > 0 && hs % 2 == 0, "rope_table: the head size must be even and positive (hs = {})",
          hs);
    check(std::isfinite(base) && base > 1, "rope_table: the base must be a number > 1 (base = {})",
          base);
    const int h = hs / 2;
    for (int i = 0; i < h; i++) {
        const double freq = std::pow(base, -2.0 * i / hs);
        for (int t = 0; t < maxT; t++) {
            const double angle = t * freq;
            cos[(size_t)t * h + i] = real(std::cos(angle));
            sin[(size_t)t * h + i] = real(std::sin(angle));
        }
    }
}

// Turns every head of q and k at each position t by sign·θ_t (sign = -1: the inverse).
// Negating sin is exact, so the inverse costs the same operations with the same roundings.
template <typename real>
void rope_rotate_scalar(real* qkv, const real* cos, const real* sin, int B, int T, int C, int NH,
                        real sign) {
    const int h = C / NH / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const real* cos_t = cos + (size_t)t * h;
            const real* sin_t = sin + (size_t)t * h;
            real* qk = qkv + ((size_t)b * T + t) * 3 * C;  // 2·NH heads of hs: q's, then k's
            for (int j = 0; j < 2 * NH; j++) {
                real* x = qk + (size_t)j * 2 * h;
                for (int i = 0; i < h; i++) {
                    const real c = cos_t[i], s = sign * sin_t[i];
                    const real x1 = x[i], x2 = x[i + h];
                    x[i] = x1 * c - x2 * s;
                    x[i + h] = x2 * c + x1 * s;
                }
            }
        }
}

template <typename real>
void rope_forward_twin(real* qkv,         // (B, T, 3C)
                       const real* cos,   // (>= T, hs/2)
                       const real* sin,   // (>= T, hs/2)
                       int B, int T, int C, int NH) {
    rope_check_sizes("rope_forward", B, T, C, NH);
    rope_rotate_scalar(qkv, cos, sin, B, T, C, NH, real(1));
}

// RoPE backward. Per pair (x_i, x_{i+h}) at position t, with c = cos θ, s = sin θ:
//   y = R x,   R = | c  -s |        RᵀR = I (c² + s² = 1): a rotation, orthogonal
//                  | s   c |
// y is linear in x, so dx = Rᵀ dy:
//   dx_i     =  c · dy_i + s · dy_{i+h}
//   dx_{i+h} = -s · dy_i + c · dy_{i+h}
// which is the rotation by -θ: the forward's code with sin negated (sign = -1 above). It is the
// transpose of the very c, s the forward used, so it is the exact gradient of the rounded
// table's map too (whose c² + s² is 1 only to within rounding). v does not pass through the
// layer, so dv is left as it is. In place: each pair of dqkv is read, then overwritten.
template <typename real>
void rope_backward_twin(real* dqkv,        // (B, T, 3C)
                        const real* cos,   // (>= T, hs/2)
                        const real* sin,   // (>= T, hs/2)
                        int B, int T, int C, int NH) {
    rope_check_sizes("rope_backward", B, T, C, NH);
    rope_rotate_scalar(dqkv, cos, sin, B, T, C, NH, real(-1));
}

}  // namespace hg
