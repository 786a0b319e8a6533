// flash_attention.h — causal multi-head self-attention that never stores the T×T matrix: the
// same function as attention.h, computed tile by tile (FlashAttention-2's order, on CPU tiles).
//
// The layout is attention.h's: qkv (B,T,3C) holds q (C), k (C), v (C) per position, each NH heads
// of hs = C/NH numbers; out (B,T,C) gets head h's result in its columns h·hs .. h·hs+hs-1. For each
// (b, h), rows t and keys s ≤ t:
//   S[t,s] = q_t · k_s / √hs                         scores
//   A[t,s] = exp(S[t,s] - M_t) / L_t                 softmax over the visible row, M_t = max_{s≤t} S[t,s],
//                                                    L_t = Σ_{s≤t} exp(S[t,s] - M_t)
//   P[t,s] = A[t,s] · f[t,s]                         dropout, f = keep / (1 - p) (f = 1 without dropout)
//   out_t  = Σ_{s≤t} P[t,s] · v_s
// The keep bit of (t, s) is drop.keep(i) with i = ((b·NH + h)·T + t)·T + s, exactly attention.h's
// index, so both layers drop the same entries and the bits do not depend on the tile size.
//
// What is saved for the backward: out (B,T,C), which the next layer keeps anyway, and one number
// per row, lse (B,NH,T) = M_t + log L_t. attention.h saves att (B,NH,T,T) instead: at B 64, NH 6,
// T 256 that is 100 MiB a layer against lse's 0.4 MiB (docs/attention-memory.md: T 1024, 4096).
//
// ---- The forward, tile by tile (steps F1–F4) --------------------------------------------------
// The keys are taken in tiles J_1, J_2, ... of `tile` positions, the rows in blocks of as many.
// A block of rows [t0, t1) reads the tiles that start before t1; a tile starting at or after t1
// lies wholly above the diagonal (every s in it is > every t in the block) and is skipped, never
// computed and masked. The tile that holds keys t0 .. t1-1 is the diagonal one: in it, row t
// takes s ≤ t only. For one row t, with m_0 = -∞, ℓ_0 = 0, o_0 = 0 (hs numbers), tile j:
//   F1. the tile's scores S[t,s], s ∈ J_j, s ≤ t
//   F2. the running max   m_j = max(m_{j-1}, max_{s ∈ J_j} S[t,s])
//   F3. rescale and add   c_j = exp(m_{j-1} - m_j)                                  (≤ 1)
//                         ℓ_j = c_j · ℓ_{j-1} + Σ_{s ∈ J_j} exp(S[t,s] - m_j)
//                         o_j = c_j · o_{j-1} + Σ_{s ∈ J_j} exp(S[t,s] - m_j) · f[t,s] · v_s
//   F4. after the last tile J:   out_t = o_J / ℓ_J,   lse_t = m_J + log ℓ_J
//
// Why the rescaling is exact. After tile j, ℓ_j = Σ exp(S[t,s] - m_j) and o_j = Σ exp(S[t,s] - m_j)
// f[t,s] v_s over the keys of tiles 1..j: true for j = 1 (c_1 = exp(-∞) = 0 wipes the empty
// start), and if true for j-1, multiplying each term exp(S - m_{j-1}) by c_j = exp(m_{j-1} - m_j)
// makes it exp(S - m_j), the new tile's terms are added with m_j already, so it holds for j. After
// the last tile m_J = M_t, so ℓ_J = L_t and o_J / ℓ_J = Σ_s (exp(S - M_t) / L_t) f v_s = out_t: the
// same number as the one-pass softmax, in exact arithmetic, for any tiling. Every exponent is ≤ 0
// (m_j is at least every score seen), so nothing overflows, as in the stable one-pass softmax. The
// dropout factor multiplies o's terms only: it drops probabilities after the normalisation, which
// L_t (ℓ) does not see.
//
// Why one number per row is enough for the backward. lse_t = M_t + log L_t = log Σ_{s≤t} exp(S[t,s]),
// so A[t,s] = exp(S[t,s] - lse_t): any probability is its score, recomputed from q_t and k_s, and one
// number of its row. f comes from the hash. Nothing of size T×T is kept.
//
// ---- The backward (steps B0–B4; B1–B4 are attention.h's steps 1–4) -----------------------------
// Given dout = dL/dout:
//   B0. D_t = dout_t · out_t                                   one dot product of two hs-rows per row
//   B1. dP[t,s] = dout_t · v_s;   dv_s += Σ_t P[t,s] · dout_t
//   B2. dA[t,s] = dP[t,s] · f[t,s]
//   B3. dS[t,s] = A[t,s] · (dA[t,s] - D_t)                     A[t,s] = exp(S[t,s] - lse_t), S recomputed
//   B4. dq_t += Σ_s dS[t,s] · k_s / √hs;   dk_s += Σ_t dS[t,s] · q_t / √hs
// Where D comes from. The softmax's Jacobian (attention.h, step 3) needs the row sum
// Σ_s A[t,s] dA[t,s]. With dA = f · (dout_t · v_s):
//   Σ_s A[t,s] dA[t,s] = Σ_s A[t,s] f[t,s] (dout_t · v_s) = dout_t · Σ_s P[t,s] v_s = dout_t · out_t = D_t.
// So the sum over the whole row is one dot product of dout_t with the saved out_t, computed before
// any tile, and each tile's dS needs only its own entries and D_t.
// The order (FlashAttention-2's): the key tiles outside, and inside, every row block that sees the
// tile (t1 > the tile's first key). A tile's dk, dv are final when its inner loop ends; dq of a
// block gathers over the tiles. The same tiles are skipped as in the forward.
// dqkv is written (=), not added to (lib/layers/layers.h): it starts at zero and every visible
// (t, s) adds its part.
//
// ---- Where this differs from attention.h in float rounding, and why that is within tolerance ----
// ε = 2⁻²⁴. In exact arithmetic the two layers compute the same numbers; in float they differ by:
//   a. the softmax: attention.h rounds exp(S - M_t) once and scales by 1/L_t; here each term is
//      exp(S - m_j) times up to (number of tiles - 1) rounded rescale factors c, divided by ℓ at the
//      end: a relative error of a few ε per tile, (2·T/tile + 4)ε at most, 36ε at T 1024.
//   b. the sums in another order: ℓ and o tile by tile, and the products in the kernels' order
//      instead of the sgemm's: at most (T + hs)ε of the sum of the terms' magnitudes, either way.
//   c. the backward's probabilities: exp(S - lse_t) with lse_t rounded to float. An error δ in an
//      exponent is a relative error δ in the exponential, and lse_t's rounding is ≈ ε·|lse_t|, so
//      the recomputed A carries ≈ (|lse_t| + 2)ε more relative error than attention.h's stored one.
//      |lse_t| ≤ max |S| + log T: ≈ 20ε for scores within ±10 at T 1024.
//   d. D_t = dout_t · out_t instead of Σ_s A dA: out carries a and b's rounding, so D_t moves by at
//      most Σ_i |dout_ti|·|error of out_ti| + hs·ε·Σ_i |dout_ti out_ti|, which reaches dS as A·δD.
// The scores themselves come from the same kernel in the same order in the forward and in the
// recomputation, so they are the same floats both times. Each term is tens of ε relative to the
// magnitudes involved: the tests compare with attention.h at 1e-5 (out) and 2e-5 (dqkv) of each
// array's scale (tests/test_flash_attention.cpp); the worst measured, at T 1024, is 1.6e-6.
//
// ---- bf16 inside (the model's dtype bfloat16) -------------------------------------------------
// flash_attention_forward_bf16 / backward_bf16 run the six tile products on bf16 inputs with float
// sums (a product of two bf16 numbers is exact in float): S = q·kᵀ and out += P̃·v forward; dP = dout·vᵀ,
// dv += P̃ᵀ·dout, dq += dS·k, dk += dSᵀ·q backward. Rounded to bf16 (u = 2⁻⁸): q, k, v and dout (once
// per pass, as they are laid out), P̃ = exp(S - m)·f (the dropped, unnormalised probabilities of a
// tile), dS, and out, which the next product reads rounded anyway: B0's D_t = dout_t · out_t reads
// that rounded out (a float sum of float dout times bf16 out), so the float out need not be kept.
// Kept in float, each for a reason:
//   the scores S      an absolute error δ in a score is a relative error δ in its probability;
//                     bf16 would add 2⁻⁹·|S| (1.6 % of a probability at |S| = 8), as attention.h says;
//   m, ℓ, lse         the softmax's statistics: lse_t enters every recomputed probability of row t
//                     as exp(-lse_t), so its error is a relative error of the whole row (c above);
//                     ℓ sums the float exp(S - m), so P̃'s rounding is an error per term, not a bias
//                     of the row's normalisation;
//   D, dP, dA         dS = A·(dA - D) is a difference of near-equal numbers wherever a row's gradient
//                     is nearly uniform: both reach it as float sums and only its result dS is rounded.
//                     Their inputs are rounded alike: dP = dout·vᵀ reads the rounded dout and v, D the
//                     rounded out, so each carries its inputs' 2⁻⁸ once and neither is a bf16 number;
//   o, dq, dk, dv     the accumulators of the products, and dqkv (and out, where a caller asks for it).
// The entry-wise bound this gives against the float layer is derived in tests/test_flash_attention.cpp.
// products: Bf16Widened (the default) runs them on the bf16 numbers widened back to float (exact),
// Bf16Dot on the CPU's bf16 dot products (AVX512_BF16) where it has them. The two are the same
// products up to the order of the float sums (lib/kernels/flash_attention_kernels.h). Which is
// faster depends on the CPU: one Xeon's vdpbf16ps runs at half the flop rate of its float fused
// multiply-adds, a Zen 5's at nearly twice (docs/attention-memory.md). The model passes the way
// its linear layers' bf16 products run (lib/model/gpt_choices.h). The scratch sizes hold either.
//
// ---- Working space and threads ----------------------------------------------------------------
// Nothing is allocated inside a call. scratch holds one slice of flash_attention_scratch(T, C, NH)
// (or flash_attention_bf16_scratch) floats per thread that runs the layer: size it for the
// threads of the caller's setting (omp_get_max_threads() outside a parallel region, 1 inside one,
// where nested regions run on the calling thread alone). The layer runs on at most as many threads
// as whole slices fit in scratch_size, and one (b, h) pair is one piece of work, done whole by one
// thread in a fixed order into its own slice: the results are the same bits for any number of
// threads, given the SIMD target.
//
// Sizes must be positive and C divisible by NH (hg::Error otherwise).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "lib/core/errors.h"
#include "lib/kernels/bf16.h"
#include "lib/kernels/flash_attention_kernels.h"  // FlashProducts
#include "lib/layers/attention.h"  // attention_dropout_factor
#include "lib/layers/dropout.h"

namespace hg {

// Floats of working space per thread (see above).
size_t flash_attention_scratch(int T, int C, int NH);
size_t flash_attention_bf16_scratch(int T, int C, int NH);

// out (B,T,C) written, lse (B,NH,T) written, qkv (B,T,3C); scratch (scratch_size floats).
void flash_attention_forward(float* out, float* lse, float* scratch, size_t scratch_size, const float* qkv, int B,
                             int T, int C, int NH, Dropout drop);
// dqkv (B,T,3C) written (=); dout (B,T,C); qkv, out, lse as the forward left them; the forward's drop.
void flash_attention_backward(float* dqkv, float* scratch, size_t scratch_size, const float* dout, const float* qkv,
                              const float* out, const float* lse, int B, int T, int C, int NH, Dropout drop);

// The same with bf16 tile products (above). out16 (B·T, C) gets out rounded to bf16, for the next
// product (lib/layers/linear.h) and for the backward, which reads it in place of out; out itself is
// written too when not null. dqkv16 (B·T, 3C), when not null, gets dqkv rounded, and dqkv may be null
// when dqkv16 is not: then only the rounded gradient is written, for a caller that reads nothing else.
void flash_attention_forward_bf16(float* out, bf16* out16, float* lse, float* scratch, size_t scratch_size,
                                  const float* qkv, int B, int T, int C, int NH, Dropout drop,
                                  FlashProducts products = FlashProducts::Bf16Widened);
void flash_attention_backward_bf16(float* dqkv, bf16* dqkv16, float* scratch, size_t scratch_size, const float* dout,
                                   const float* qkv, const bf16* out16, const float* lse, int B, int T, int C, int NH,
                                   Dropout drop, FlashProducts products = FlashProducts::Bf16Widened);

// The checks of every entry point, the twin's too (hg::Error naming the bad value); returns hs.
inline int flash_attention_check(int B, int T, int C, int NH, Dropout drop) {
    check(B > 0 && T > 0 && C > 0 && NH > 0, "flash attention: sizes must be positive (B={}, T={}, C={}, NH={})", B,
          T, C, NH);
    check(C % NH == 0, "n_embd (C={}) must be divisible by n_head ({})", C, NH);
    check(drop.p >= 0.0f && drop.p < 1.0f, "flash attention: dropout p must be in [0, 1) (p={})", drop.p);
    return C / NH;
}

// ---- the scalar twin ------------------------------------------------------------------------------
// The flash algorithm itself in plain loops, for any number type: the gradient checks run it in
// double, and the tests run the fast path (lib/kernels/flash_attention_kernels.h) against it in
// float. tile: positions per key tile and per row block (any tile ≥ 1; the fast path's is
// kFlashTile). The materialised attention (attention.h) stays the reference both are checked against.
//
// FlashPlant: a deliberately wrong variant for the tests, to show that their checks fail on it
// (tests/test_flash_attention.cpp); the layer always runs None. Each sits where its choice is made.
enum class FlashPlant {
    None,
    InverseRescale,  // F3 with c = exp(m_j - m_{j-1}), the factor upside down
    SkipDiagonal,    // the diagonal tile skipped as if it lay above the diagonal
    DFromV,          // B0 with D_t = dout_t · v_t, the wrong operand, instead of dout_t · out_t
};

template <typename real, FlashPlant kPlant = FlashPlant::None>
void flash_attention_forward_twin(real* out,        // (B, T, C) written
                                  real* lse,        // (B, NH, T) written
                                  const real* qkv,  // (B, T, 3C)
                                  int B, int T, int C, int NH, Dropout drop, int tile) {
    const int hs = flash_attention_check(B, T, C, NH, drop);
    check(tile >= 1, "flash attention: the tile must be at least 1 position (tile={})", tile);
    const size_t C3 = 3 * size_t(C);
    const real scale = real(1) / std::sqrt(real(hs));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t0 = 0; t0 < T; t0 += tile) {  // a block of rows
                const int t1 = std::min(T, t0 + tile);
                for (int t = t0; t < t1; t++) {
                    const real* q_t = qkv + (size_t(b) * T + t) * C3 + size_t(h) * hs;
                    real* o = out + (size_t(b) * T + t) * C + size_t(h) * hs;  // o_j, then out_t
                    const size_t row = ((size_t(b) * NH + h) * T + t) * T;     // dropout index of (t, 0)
                    real m = -std::numeric_limits<real>::infinity(), l = 0;
                    for (int i = 0; i < hs; i++) o[i] = 0;
                    // the key tiles that start before t1; those at or after it lie above the diagonal
                    const int s_end = kPlant == FlashPlant::SkipDiagonal ? t0 : t1;
                    for (int s0 = 0; s0 < s_end; s0 += tile) {
                        const int s1 = std::min(t + 1, s0 + tile);  // this row's keys in the tile: s ≤ t
                        if (s1 <= s0) continue;
                        real m_new = m;  // F1, F2
                        for (int s = s0; s < s1; s++) {
                            const real* k_s = qkv + (size_t(b) * T + s) * C3 + C + size_t(h) * hs;
                            real dot = 0;
                            for (int i = 0; i < hs; i++) dot += q_t[i] * k_s[i];
                            m_new = std::max(m_new, dot * scale);
                        }
                        // F3: c = exp(m_{j-1} - m_j) rescales what the earlier tiles summed
                        const real c = kPlant == FlashPlant::InverseRescale && l > 0 ? std::exp(m_new - m)
                                                                                     : std::exp(m - m_new);
                        l *= c;
                        for (int i = 0; i < hs; i++) o[i] *= c;
                        for (int s = s0; s < s1; s++) {
                            const real* k_s = qkv + (size_t(b) * T + s) * C3 + C + size_t(h) * hs;
                            const real* v_s = k_s + C;
                            real dot = 0;
                            for (int i = 0; i < hs; i++) dot += q_t[i] * k_s[i];
                            const real e = std::exp(dot * scale - m_new);
                            l += e;
                            const real p = e * attention_dropout_factor<real>(drop, row + s);
                            for (int i = 0; i < hs; i++) o[i] += p * v_s[i];
                        }
                        m = m_new;
                    }
                    for (int i = 0; i < hs; i++) o[i] /= l;  // F4
                    lse[(size_t(b) * NH + h) * T + t] = m + std::log(l);
                }
            }
}

template <typename real, FlashPlant kPlant = FlashPlant::None>
void flash_attention_backward_twin(real* dqkv,        // (B, T, 3C) written
                                   const real* dout,  // (B, T, C)
                                   const real* qkv,   // (B, T, 3C)
                                   const real* out,   // (B, T, C) from the forward
                                   const real* lse,   // (B, NH, T) from the forward
                                   int B, int T, int C, int NH, Dropout drop, int tile) {
    const int hs = flash_attention_check(B, T, C, NH, drop);
    check(tile >= 1, "flash attention: the tile must be at least 1 position (tile={})", tile);
    const size_t C3 = 3 * size_t(C);
    const real scale = real(1) / std::sqrt(real(hs));
    for (size_t i = 0; i < size_t(B) * T * C3; i++) dqkv[i] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int s0 = 0; s0 < T; s0 += tile) {  // a key tile, outside
                const int s_end = std::min(T, s0 + tile);
                // the row blocks that see it: every block [t0, t1) with t1 > s0 (the diagonal one first)
                for (int t0 = s0 / tile * tile; t0 < T; t0 += tile) {
                    if (kPlant == FlashPlant::SkipDiagonal && t0 < s_end) continue;
                    const int t1 = std::min(T, t0 + tile);
                    for (int t = t0; t < t1; t++) {
                        const size_t at_t = (size_t(b) * T + t) * C3 + size_t(h) * hs;  // q_t in qkv
                        const real* q_t = qkv + at_t;
                        const real* dout_t = dout + (size_t(b) * T + t) * C + size_t(h) * hs;
                        const real* out_t = out + (size_t(b) * T + t) * C + size_t(h) * hs;
                        const real lse_t = lse[(size_t(b) * NH + h) * T + t];
                        const size_t row = ((size_t(b) * NH + h) * T + t) * T;
                        real D = 0;  // B0 (a real layer computes it once per row, before the tiles)
                        const real* with = kPlant == FlashPlant::DFromV ? qkv + at_t + 2 * size_t(C) : out_t;
                        for (int i = 0; i < hs; i++) D += dout_t[i] * with[i];
                        for (int s = s0; s < std::min(s_end, t + 1); s++) {
                            const size_t at_s = (size_t(b) * T + s) * C3 + size_t(h) * hs;  // q_s in qkv
                            const real* k_s = qkv + at_s + C;
                            const real* v_s = qkv + at_s + 2 * size_t(C);
                            real dot = 0, dP = 0;
                            for (int i = 0; i < hs; i++) dot += q_t[i] * k_s[i], dP += dout_t[i] * v_s[i];
                            const real A = std::exp(dot * scale - lse_t);  // B3's A, from S and lse
                            const real f = attention_dropout_factor<real>(drop, row + s);
                            const real dS = A * (dP * f - D);  // B1's dP, B2, B3
                            for (int i = 0; i < hs; i++) {
                                dqkv[at_s + 2 * size_t(C) + i] += A * f * dout_t[i];  // B1: dv
                                dqkv[at_t + i] += dS * k_s[i] * scale;                 // B4: dq
                                dqkv[at_s + C + i] += dS * q_t[i] * scale;             // B4: dk
                            }
                        }
                    }
                }
            }
}

}  // namespace hg
