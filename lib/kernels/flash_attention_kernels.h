// flash_attention_kernels.h — one (b, h) of the flash layer (lib/layers/flash_attention.h), forward
// and backward, with float or bf16 tile products: Highway kernels (dynamic dispatch; see simd.h).
// The derivation and the scalar twin (flash_attention_forward_twin / backward_twin) are in
// lib/layers/flash_attention.h; lib/layers/flash_attention.cpp runs these per (b, h), and the tests
// run that layer against the twin on every SIMD target.
//
// How the kernels map to the derivation's steps. They do the twin's arithmetic, regrouped so that
// each step is one small matrix product over a tile, or one pass over a tile's rows:
//   forward, per block of rows [t0, t1), per key tile [s0, s1) with s0 < t1:
//     F1      S = q[t0:t1] · k[s0:s1]ᵀ                                 product (kFlashTile × kFlashTile)
//     F2, F3  per row: max, c = exp(m_old - m_new), P = exp(S/√hs - m_new) on the visible keys,
//             ℓ = c·ℓ + Σ P, P̃ = P·f (the dropout hash), o *= c         one pass over the row
//     F3      o += P̃ · v[s0:s1]                                        product
//     F4      out = o / ℓ, lse = m + log ℓ                              once per block
//   backward: per key tile [s0, s1), per block [t0, t1) with t1 > s0 (B0, D_t = dout_t · out_t, for
//   each block's rows while the first key tile visits it, before any of its dS):
//     S = q·kᵀ and B1's dP = dout·vᵀ                                    two products
//     per row: A = exp(S/√hs - lse_t), P̃ = A·f, dA = dP·f (one hash for both), dS = A·(dA - D_t)/√hs
//     B1 dv[s0:s1] += P̃ᵀ · dout[t0:t1],  B4 dk[s0:s1] += dSᵀ · q[t0:t1],  dq[t0:t1] += dS · k[s0:s1]
// Two regroupings change roundings (not the math): 1/√hs multiplies the raw dot products in the row
// pass (the twin multiplies each dot product the same way) and, in the backward, dS once, for both
// dq and dk (the twin scales each term). The diagonal tile's products skip whole vectors and rows of
// the masked triangle (every masked entry of P̃ and dS is an exact 0, so only zeros are skipped).
//
// The products (flash_tile_products-inl.h): c (rows × N) (=, +=) a (rows × K) · b (K × N), b's rows
// contiguous, kMR rows of c in registers, four vectors of columns, a read one number at a time and
// broadcast; so every product's right operand has its columns contiguous: k and v transposed for the
// scores and dP (tile by tile), and v, dout, q, k as rows, read where they lie in the layer's tensors
// when hs is a whole number of vectors (float), else copied with their rows padded (and in bf16
// always copied, rounded). Each is laid out when a block or tile first needs it, and the next
// block's rows are asked for ahead (their rows lie 3C or C numbers apart, each in another page,
// where the hardware does not look ahead). Sums run over k in increasing order, one lane per element.
//
// bf16: the operands are rounded to bf16 as they are laid out, two ways (FlashProducts):
//   widened  the rounded operands are widened back to float (exact) as they are laid out, and the
//            float products run on them: a product of two bf16 numbers is exact in float, so this is
//            a bf16 product with float sums, at the float kernels' speed plus the rounding;
//   dot      where the CPU has AVX512_BF16 and the target is a 512-bit x86 one: two operands along k
//            in one 32-bit number (a pair: the even k in the low half), and a step of a product is
//            vdpbf16ps, c += a₂ₖ₊₁·b₂ₖ₊₁, then c += a₂ₖ·b₂ₖ, each rounded once; it treats subnormal
//            inputs and results as 0 (2⁻¹²⁶, far below the bound the tests check).
// The two are the same products summed in another order. Which is faster is the CPU's business:
// vdpbf16ps does twice a fused multiply-add's work per instruction, but where it issues at a
// quarter of their rate (docs/attention-memory.md) the widened products win.
#pragma once
#include <cstddef>

#include "lib/kernels/bf16.h"
#include "lib/kernels/dropout_kernels.h"

namespace hg {

// Positions per key tile and per row block. 64: a tile of scores is 16 KiB, and a tile's k, v and
// its scores fit in a 48 KiB L1 with the rows of q being read (docs/attention-memory.md, measured
// against 32 and 128).
constexpr int kFlashTile = 64;

// Which products a kernel runs.
enum class FlashProducts {
    Float,        // float inputs
    Bf16Widened,  // bf16 inputs, widened back to float as they are laid out: float products
    Bf16Dot,      // bf16 inputs, the CPU's dot products where it has them (else as Bf16Widened)
};

// One (b, h) of the layer: its inputs. Entry (t, s) of its dropout is drop.keep(drop_base + t·T + s).
struct FlashHead {
    int T = 0, hs = 0;
    const float* q = nullptr;     // (T, hs), row stride ld
    const float* k = nullptr;     // (T, hs), row stride ld
    const float* v = nullptr;     // (T, hs), row stride ld
    size_t ld = 0;
    const float* out = nullptr;   // (T, hs), row stride ldo: the forward's result, which the backward reads
    const bf16* out16 = nullptr;  // the same rounded to bf16 (row stride ldo), read instead where out is null
    const float* dout = nullptr;  // (T, hs), row stride ldo: the backward's
    size_t ldo = 0;
    const float* lse = nullptr;   // (T): the forward's, which the backward reads
    Dropout drop;
    size_t drop_base = 0;
};

// Floats of working space one call needs (forward or backward, the larger).
size_t flash_head_scratch(int T, int hs, FlashProducts products);

// Does FlashProducts::Bf16Dot run on the CPU's bf16 dot products at the current SIMD target?
bool flash_bf16_dot_available();

// out (T, hs), row stride head.ldo, written; out16 likewise rounded; each skipped when null; lse (T)
// written. next: the head this thread runs after this one (or null), whose inputs are asked for
// while this one runs (its rows lie in other pages than this head's, where the hardware does not
// look ahead).
void flash_head_forward(float* out, bf16* out16, float* lse, const FlashHead& head, const FlashHead* next,
                        FlashProducts products, float* scratch);

// The row pass's exponentials, as the kernels run them, for the tests: p_j = exp(x_j·scale - shift)
// for j < n, 0 for n ≤ j < width (width a multiple of 16; n ≤ width); returns Σ_j p_j. Exact to a
// few roundings where x_j·scale - shift ≥ -126·ln 2 (≈ -87.3), 0 below it (lib/kernels/exp-inl.h).
float flash_exp_row(float* p, const float* x, int n, int width, float scale, float shift);

// The gradients of one head: dq, dk, dv (T, hs) written, row stride ld, and dq16, dk16, dv16 likewise
// rounded, each where not null.
struct FlashGrads {
    float *dq = nullptr, *dk = nullptr, *dv = nullptr;
    bf16 *dq16 = nullptr, *dk16 = nullptr, *dv16 = nullptr;
    size_t ld = 0;
};
// From head.q, k, v, out (or out16), dout, lse; next as in the forward.
void flash_head_backward(const FlashGrads& grads, const FlashHead& head, const FlashHead* next,
                         FlashProducts products, float* scratch);

}  // namespace hg
