// flash_attention_kernels.cpp — Highway implementations of flash_attention_kernels.h, compiled for
// every target by foreach_target.h. The header maps the steps here to the derivation's F1–F4, B0–B4.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/flash_attention_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>
#include <hwy/cache_control.h>  // hwy::Prefetch
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "lib/core/tensor.h"
#include "lib/kernels/bf16-inl.h"
#include "lib/kernels/flash_attention_kernels.h"
#include "lib/kernels/simd.h"  // cpu_has_bf16_dot

// ---- the working space of one call, the same on every target ------------------------------------
#ifndef HG_FLASH_SPACE
#define HG_FLASH_SPACE
namespace hg::flash_space {
constexpr int kTile = kFlashTile;
// hs padded to a whole number of vectors (at most 16 lanes here): the products' columns.
inline int PadHs(int hs) { return (hs + 15) / 16 * 16; }
// T padded to whole tiles: the transposed k and v are zero past T, so the last tile's products
// read zeros there.
inline int PadT(int T) { return (T + kTile - 1) / kTile * kTile; }

// A thread's slice handed out in regions (Carver, tensor.h); a bf16 operand region holds pairs,
// one 32-bit number per two bf16.
struct Carve : Carver<float> {
    uint32_t* pairs(size_t n) { return reinterpret_cast<uint32_t*>(take(n)); }
};

// The forward's regions. Float: kt (Tp/tile blocks of (hs, tile)) = kᵀ tile by tile; qp, vp (Tp, hsp)
// = q, v where they are copied (rounded, or hs no whole number of vectors). Pairs: q16 (Tp, hsp/2) =
// q's rows in pairs along hs; kt2 (Tp/tile blocks of (hsp/2, tile)) = k in pairs along hs, tile by tile,
// transposed; v2 (Tp/2, hsp) = v in pairs along rows; p16 (tile, tile/2) = a tile's P̃ in pairs along
// keys; k16 (tile, hsp/2) a tile of k's rows on their way to kt2. Both: s (tile, tile) the scores, then
// P̃ in float; o (tile, hsp) the output's sums; m and l (tile) the running max and sum.
struct ForwardSpace {
    float *kt, *qp, *vp, *s, *o, *m, *l;
    uint32_t *q16, *kt2, *v2, *p16, *k16;
};
inline ForwardSpace forward_space(Carve& c, int T, int hs, bool pairs) {
    const size_t Tp = PadT(T), hsp = PadHs(hs), tile = kTile;
    ForwardSpace f{};
    if (pairs) {
        f.q16 = c.pairs(Tp * hsp / 2), f.kt2 = c.pairs(hsp / 2 * Tp), f.v2 = c.pairs(Tp / 2 * hsp);
        f.p16 = c.pairs(tile * tile / 2), f.k16 = c.pairs(tile * hsp / 2);
    } else {
        f.kt = c.take(size_t(hs) * Tp), f.qp = c.take(Tp * hsp), f.vp = c.take(Tp * hsp);
    }
    f.s = c.take(tile * tile), f.o = c.take(tile * hsp), f.m = c.take(tile), f.l = c.take(tile);
    return f;
}

// The backward's regions. Float: kt, vt (hs, tile) = the current key tile of kᵀ, vᵀ; qp, kp, dop (Tp,
// hsp) = q, k, dout where they are copied. Pairs: kt2, vt2 (hsp/2, tile) the same in pairs along hs;
// q16, do16 (Tp, hsp/2) q's and dout's rows in pairs along hs; q2, k2, do2 (Tp/2, hsp) in pairs along
// rows; of a tile, pd2, ds2 (tile/2, tile) P̃ and dS in pairs along rows and ds16 (tile, tile/2) dS in
// pairs along keys; k16 (tile, hsp/2) a tile of k's or v's rows on their way to kt2, vt2. Both: D (Tp);
// of a tile, p (tile, tile) the probabilities, pd (tile, tile) P̃ (with dropout), dp (tile, tile) dP,
// then dA, then dS; dq (Tp, hsp), dk, dv (tile, hsp) the gradients' sums.
struct BackwardSpace {
    float *kt, *vt, *qp, *kp, *dop, *D, *p, *pd, *dp, *dq, *dk, *dv;
    uint32_t *q16, *do16, *kt2, *vt2, *q2, *k2, *do2, *pd2, *ds2, *ds16, *k16;
};
inline BackwardSpace backward_space(Carve& c, int T, int hs, bool pairs) {
    const size_t Tp = PadT(T), hsp = PadHs(hs), tile = kTile;
    BackwardSpace g{};
    if (pairs) {
        g.q16 = c.pairs(Tp * hsp / 2), g.do16 = c.pairs(Tp * hsp / 2);
        g.kt2 = c.pairs(hsp / 2 * tile), g.vt2 = c.pairs(hsp / 2 * tile);
        g.q2 = c.pairs(Tp / 2 * hsp), g.k2 = c.pairs(Tp / 2 * hsp), g.do2 = c.pairs(Tp / 2 * hsp);
        g.pd2 = c.pairs(tile / 2 * tile), g.ds2 = c.pairs(tile / 2 * tile), g.ds16 = c.pairs(tile * tile / 2);
        g.k16 = c.pairs(tile * hsp / 2);
    } else {
        g.kt = c.take(size_t(hs) * tile), g.vt = c.take(size_t(hs) * tile);
        g.qp = c.take(Tp * hsp), g.kp = c.take(Tp * hsp), g.dop = c.take(Tp * hsp);
    }
    g.D = c.take(Tp), g.p = c.take(tile * tile), g.pd = c.take(tile * tile), g.dp = c.take(tile * tile);
    g.dq = c.take(Tp * hsp), g.dk = c.take(tile * hsp), g.dv = c.take(tile * hsp);
    return g;
}
}  // namespace hg::flash_space
#endif

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace hg::flash_space;

// At most 16 lanes: a tile of 64 keys and a padded head are whole vectors on every target. SVE's
// vectors can be wider; there the first 512 bits are used.
using D = hn::CappedTag<float, 16>;
using DU = hn::RebindToUnsigned<D>;
using V = hn::Vec<D>;
using VU = hn::Vec<DU>;

// ---- the products -------------------------------------------------------------------------------
// c (rows × N) = or += a (rows × K) · b (K × N): kMR rows of c by kNV vectors of columns in
// registers (16 of AVX-512's, NEON's and SVE's 32; 8 of AVX2's and SSE's 16), per k one number of
// each row of a broadcast and kNV vectors of b's row k loaded.
constexpr int kMR = 4;
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3) || (HWY_ARCH_ARM && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR)
constexpr int kNV = 4;
#else
constexpr int kNV = 2;
#endif

// A step of a product, c += a·b, for one number type of the operands.
struct FloatStep {  // float operands
    using E = float;
    static constexpr bool kRound = false;
    static HWY_INLINE V Bcast(const float* a) { return hn::Set(D(), *a); }
    static HWY_INLINE V Load(const float* b) { return hn::LoadU(D(), b); }
    static HWY_INLINE V Fma(V a, V b, V c) { return hn::MulAdd(a, b, c); }
};
// float operands that hold bf16 numbers (rounded as they are laid out, widened back exactly)
struct RoundedStep : FloatStep {
    static constexpr bool kRound = true;
};
#undef HG_FLASH_BF16_DOT  // set once per target below
// AVX512_BF16's dot product, on the 512-bit x86 targets. Highway 1.0.3 has no operation for it and
// its target attribute cannot be added to the kernels' (the intrinsic would then not inline into
// them), so this one instruction is written as assembly: the assembler takes it whatever the
// compiler's target; it runs only where cpu_has_bf16_dot() said the CPU has it (Bf16DotAvailable).
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || \
                     (defined(HWY_AVX3_ZEN4) && HWY_TARGET == HWY_AVX3_ZEN4) || \
                     (defined(HWY_AVX3_SPR) && HWY_TARGET == HWY_AVX3_SPR))
#define HG_FLASH_BF16_DOT 1
struct DotStep {  // bf16 pairs: c += a_odd·b_odd, then c += a_even·b_even, in one instruction
    using E = uint32_t;
    static constexpr bool kRound = false;  // rounded as they are paired
    static HWY_INLINE VU Bcast(const uint32_t* a) {
        uint32_t x;
        std::memcpy(&x, a, sizeof x);  // the region is written as bf16 too: read it as bytes
        return hn::Set(DU(), x);
    }
    static HWY_INLINE VU Load(const uint32_t* b) { return hn::LoadU(DU(), b); }
    static HWY_INLINE V Fma(VU a, VU b, V c) {
        __asm__("vdpbf16ps %2, %1, %0" : "+v"(c.raw) : "v"(a.raw), "v"(b.raw));
        return c;
    }
};
#else
#define HG_FLASH_BF16_DOT 0
#endif

// kMR rows of c from rows a, a + ars, ... (row r's number k at a + r·ars + k·aks; rows past mr
// repeat row mr - 1 and are not stored) and NV vectors of b's rows k0 .. k1 - 1 (row stride ldb).
template <class Step, int NV>
HWY_NOINLINE void Tile(const typename Step::E* a, size_t ars, size_t aks, int mr, const typename Step::E* b,
                       size_t ldb, int k0, int k1, float* c, size_t ldc, bool add) {
    const D d;
    const size_t L = hn::Lanes(d);
#define HG_FLASH_ACC(r)                                                                            \
    const typename Step::E* a##r = a + size_t(std::min(r, mr - 1)) * ars;                          \
    V c##r##0 = add && r < mr ? hn::LoadU(d, c + r * ldc) : hn::Zero(d);                           \
    V c##r##1 = NV > 1 && add && r < mr ? hn::LoadU(d, c + r * ldc + L) : hn::Zero(d);             \
    V c##r##2 = NV > 2 && add && r < mr ? hn::LoadU(d, c + r * ldc + 2 * L) : hn::Zero(d);         \
    V c##r##3 = NV > 3 && add && r < mr ? hn::LoadU(d, c + r * ldc + 3 * L) : hn::Zero(d);
    HG_FLASH_ACC(0) HG_FLASH_ACC(1) HG_FLASH_ACC(2) HG_FLASH_ACC(3)
#undef HG_FLASH_ACC
#define HG_FLASH_ROW(r)                                                 \
    {                                                                   \
        const auto x = Step::Bcast(a##r + at);                          \
        c##r##0 = Step::Fma(x, b0, c##r##0);                            \
        if constexpr (NV > 1) c##r##1 = Step::Fma(x, b1, c##r##1);      \
        if constexpr (NV > 2) c##r##2 = Step::Fma(x, b2, c##r##2);      \
        if constexpr (NV > 3) c##r##3 = Step::Fma(x, b3, c##r##3);      \
    }
    for (int k = k0; k < k1; k++) {
        const size_t at = size_t(k) * aks;
        const typename Step::E* bk = b + size_t(k) * ldb;
        const auto b0 = Step::Load(bk);
        const auto b1 = NV > 1 ? Step::Load(bk + L) : b0;
        const auto b2 = NV > 2 ? Step::Load(bk + 2 * L) : b0;
        const auto b3 = NV > 3 ? Step::Load(bk + 3 * L) : b0;
        HG_FLASH_ROW(0) HG_FLASH_ROW(1) HG_FLASH_ROW(2) HG_FLASH_ROW(3)
    }
#undef HG_FLASH_ROW
#define HG_FLASH_STORE(r)                                                     \
    if (r < mr) {                                                             \
        hn::StoreU(c##r##0, d, c + r * ldc);                                  \
        if constexpr (NV > 1) hn::StoreU(c##r##1, d, c + r * ldc + L);        \
        if constexpr (NV > 2) hn::StoreU(c##r##2, d, c + r * ldc + 2 * L);    \
        if constexpr (NV > 3) hn::StoreU(c##r##3, d, c + r * ldc + 3 * L);    \
    }
    HG_FLASH_STORE(0) HG_FLASH_STORE(1) HG_FLASH_STORE(2) HG_FLASH_STORE(3)
#undef HG_FLASH_STORE
}
static_assert(kMR == 4, "Tile spells out four rows");

// Which part of a product the causal mask leaves, for a tile whose rows start `off` positions after
// its keys (off = t0 - s0 ≥ 0): query t = t0 + i sees key s = s0 + j iff j ≤ i + off.
enum class Causal {
    Cols,    // c's columns are keys: row i needs columns j ≤ i + off only (the scores, dP)
    KEnd,    // k runs over keys, a's zeros past it: row i sums k ≤ i + off only (P̃·v, dS·k)
    KBegin,  // c's rows are keys, k runs over queries: row j sums k ≥ j - off only (P̃ᵀ·dout, dSᵀ·q)
};

// c (rows × N) (=, +=) a (rows × K) · b (K × N), N a whole number of vectors, K in steps of the
// operand type (one float, or one pair of bf16). Only the part `causal` leaves is computed: skipped
// columns of c are not written, skipped k are zeros of a.
template <class Step>
void Product(float* c, size_t ldc, const typename Step::E* a, size_t ars, size_t aks, const typename Step::E* b,
             size_t ldb, int rows, int N, int K, Causal causal, int off, bool add) {
    using Fn = void (*)(const typename Step::E*, size_t, size_t, int, const typename Step::E*, size_t, int, int,
                        float*, size_t, bool);
    static constexpr Fn kTiles[4] = {Tile<Step, 1>, Tile<Step, std::min(2, kNV)>, Tile<Step, std::min(3, kNV)>,
                                     Tile<Step, kNV>};
    constexpr int kPer = std::is_same_v<typename Step::E, float> ? 1 : 2;  // positions per step of k
    const int L = int(hn::Lanes(D()));
    for (int r0 = 0; r0 < rows; r0 += kMR) {
        const int mr = std::min(kMR, rows - r0), r_last = r0 + mr - 1;
        int n1 = N, k0 = 0, k1 = K;
        if (causal == Causal::Cols) n1 = std::min(N, (r_last + off + L) / L * L);
        if (causal == Causal::KEnd) k1 = std::min(K, (r_last + off + kPer) / kPer);
        if (causal == Causal::KBegin) k0 = std::max(0, r0 - off) / kPer;
        for (int n0 = 0; n0 < n1; n0 += kNV * L) {
            const int nv = std::min(kNV, (n1 - n0) / L);
            kTiles[nv - 1](a + size_t(r0) * ars, ars, aks, mr, b + n0, ldb, k0, k1, c + size_t(r0) * ldc + n0, ldc,
                           add);
        }
    }
}

// ---- laying the operands out --------------------------------------------------------------------
// v, or v rounded to bf16 and widened back (exact) when `round`.
HWY_INLINE V MaybeRounded(V v, bool round) {
    return round ? hn::BitCast(D(), hn::ShiftLeft<16>(Bf16Bits(D(), v))) : v;
}
inline float MaybeRounded(float x, bool round) { return round ? bf16_to_float(bf16_from_float(x)) : x; }

// src (rows, cols), row stride lds, transposed into tiles: the transpose of rows [j·kTile, (j+1)·kTile)
// is block j of dst, (cols, kTile) with row stride kTile, at dst + j·cols·kTile; zero past rows, up to
// rows_pad (a whole number of tiles). A key tile of kᵀ or vᵀ is then one contiguous block: with a row
// stride of Tp instead, its rows 4 KiB apart (T 1024) would share a few sets of L1 and evict each
// other. A vector of a block's row gathers column j of a vector's worth of src's rows. E: float
// (rounded to bf16 when `round`), or uint32_t (bf16 pairs, moved whole).
template <typename E>
void TransposeTiles(E* dst, const E* src, size_t lds, int rows, int cols, int rows_pad, bool round = false) {
    const hn::Rebind<E, D> de;
    const hn::RebindToSigned<decltype(de)> di;
    const int L = int(hn::Lanes(de));  // divides kTile
    const auto at = hn::Mul(hn::Iota(di, 0), hn::Set(di, int32_t(lds)));  // lds·3·T fits an int32 (the layer's size)
    auto out = [&](int j, int r) { return dst + size_t(r / kTile) * cols * kTile + size_t(j) * kTile + r % kTile; };
    int r = 0;
    for (; r + L <= rows; r += L)
        for (int j = 0; j < cols; j++) {
            const auto g = hn::GatherIndex(de, src + size_t(r) * lds + j, at);
            if constexpr (std::is_same_v<E, float>)
                hn::StoreU(MaybeRounded(g, round), de, out(j, r));
            else
                hn::StoreU(g, de, out(j, r));
        }
    for (; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            const E x = src[size_t(r) * lds + j];
            if constexpr (std::is_same_v<E, float>)
                *out(j, r) = MaybeRounded(x, round);
            else
                *out(j, r) = x;
        }
    for (; r < rows_pad; r++)
        for (int j = 0; j < cols; j++) *out(j, r) = E(0);
}

// dst (rows_pad, ldd) = src (rows, cols), row stride lds, rounded to bf16 when `round`; zero past cols
// and rows.
void CopyPadded(float* dst, size_t ldd, const float* src, size_t lds, int rows, int cols, int rows_pad, bool round) {
    const D d;
    const int L = int(hn::Lanes(d));
    for (int r = 0; r < rows_pad; r++) {
        float* row = dst + size_t(r) * ldd;
        const float* in = src + size_t(r) * lds;
        const int n = r < rows ? cols : 0;
        int j = 0;
        for (; j + L <= n; j += L) hn::StoreU(MaybeRounded(hn::LoadU(d, in + j), round), d, row + j);
        for (; j < n; j++) row[j] = MaybeRounded(in[j], round);
        std::fill(row + n, row + ldd, 0.0f);
    }
}

inline uint32_t Pair(float even, float odd) {
    return uint32_t(bf16_from_float(even)) | uint32_t(bf16_from_float(odd)) << 16;
}

// dst (rows_pad, ldd pairs): row r = src's row r rounded to bf16, in pairs along it (numbers 2k and
// 2k + 1 in pair k), zero past cols and rows.
void RoundRows(uint32_t* dst, size_t ldd, const float* src, size_t lds, int rows, int cols, int rows_pad) {
    const D d;
    const int L = int(hn::Lanes(d));
    const int vec = L % 2 ? 0 : cols / L * L;  // whole vectors, an even count of numbers
    for (int r = 0; r < rows_pad; r++) {
        uint32_t* out = dst + size_t(r) * ldd;
        const float* in = src + size_t(r) * lds;
        const int n = r < rows ? cols : 0;
        int j = 0;
        if (n)
            for (; j < vec; j += L) StoreBf16(d, hn::LoadU(d, in + j), reinterpret_cast<bf16*>(out) + j);
        for (; j < 2 * int(ldd); j += 2) out[j / 2] = Pair(j < n ? in[j] : 0.0f, j + 1 < n ? in[j + 1] : 0.0f);
    }
}

// dst (rows_pad / 2, ldd) = src (rows, cols) rounded to bf16 in pairs along its columns: pair (p, j)
// holds rows 2p and 2p + 1 of column j; zero past cols and rows.
void RoundPairsOfRows(uint32_t* dst, size_t ldd, const float* src, size_t lds, int rows, int cols, int rows_pad) {
    const D d;
    const DU du;
    const int L = int(hn::Lanes(d));
    for (int p = 0; p < rows_pad / 2; p++) {
        uint32_t* out = dst + size_t(p) * ldd;
        const int r = 2 * p;
        const float* even = src + size_t(r) * lds;
        const float* odd = r + 1 < rows ? even + lds : nullptr;
        const int n = r < rows ? cols : 0;
        int j = 0;
        for (; j + L <= n; j += L) {
            const VU lo = Bf16Bits(d, hn::LoadU(d, even + j));
            const VU hi = odd ? Bf16Bits(d, hn::LoadU(d, odd + j)) : hn::Zero(du);
            hn::StoreU(hn::Or(lo, hn::ShiftLeft<16>(hi)), du, out + j);
        }
        for (; j < int(ldd); j++) out[j] = j < n ? Pair(even[j], odd ? odd[j] : 0.0f) : 0u;
    }
}

// ---- one row of a tile ----------------------------------------------------------------------------
// max_{j < n} x_j·scale (n ≥ 1).
float ScaledMax(const float* x, int n, float scale) {
    const D d;
    const int L = int(hn::Lanes(d));
    const V vs = hn::Set(d, scale), lowest = hn::Set(d, -std::numeric_limits<float>::infinity());
    V mx = lowest;
    for (int j = 0; j < n; j += L)
        mx = hn::Max(mx, hn::IfThenElse(hn::FirstN(d, size_t(n - j)), hn::Mul(hn::LoadU(d, x + j), vs), lowest));
    return hn::GetLane(hn::MaxOfLanes(d, mx));
}

// p_j = exp(x_j·scale - shift) for j < n, 0 for n ≤ j < width (width a whole number of vectors);
// returns Σ_j p_j. p may alias x.
float ExpRow(float* p, const float* x, int n, int width, float scale, float shift) {
    const D d;
    const int L = int(hn::Lanes(d));
    const V vs = hn::Set(d, scale), vshift = hn::Set(d, shift);
    V sum = hn::Zero(d);
    int j = 0;
    for (; j < n; j += L) {
        const V e = hn::Exp(d, hn::Sub(hn::Mul(hn::LoadU(d, x + j), vs), vshift));
        const V kept = hn::IfThenElseZero(hn::FirstN(d, size_t(n - j)), e);
        sum = hn::Add(sum, kept);
        hn::StoreU(kept, d, p + j);
    }
    for (; j < width; j += L) hn::StoreU(hn::Zero(d), d, p + j);
    return hn::GetLane(hn::SumOfLanes(d, sum));
}

// ds_j = scale·p_j·(da_j - Dt) for j < n, 0 for n ≤ j < width. ds may alias da.
void GradRow(float* ds, const float* p, const float* da, int n, int width, float Dt, float scale) {
    const D d;
    const int L = int(hn::Lanes(d));
    const V vD = hn::Set(d, Dt), vs = hn::Set(d, scale);
    int j = 0;
    for (; j < n; j += L) {
        const V g = hn::Mul(hn::Mul(hn::LoadU(d, p + j), vs), hn::Sub(hn::LoadU(d, da + j), vD));
        hn::StoreU(hn::IfThenElseZero(hn::FirstN(d, size_t(n - j)), g), d, ds + j);
    }
    for (; j < width; j += L) hn::StoreU(hn::Zero(d), d, ds + j);
}

// x_j *= s for j < n (n a whole number of vectors).
void ScaleRow(float* x, int n, float s) {
    const D d;
    const V vs = hn::Set(d, s);
    for (int j = 0; j < n; j += int(hn::Lanes(d))) hn::StoreU(hn::Mul(hn::LoadU(d, x + j), vs), d, x + j);
}

// x_j /= s for j < n (n a whole number of vectors).
void DivideRow(float* x, int n, float s) {
    const D d;
    const V vs = hn::Set(d, s);
    for (int j = 0; j < n; j += int(hn::Lanes(d))) hn::StoreU(hn::Div(hn::LoadU(d, x + j), vs), d, x + j);
}

// Σ_j a_j·b_j over n numbers (lanes, then a scalar tail).
float DotRow(const float* a, const float* b, int n) {
    const D d;
    const int L = int(hn::Lanes(d));
    V acc = hn::Zero(d);
    int j = 0;
    for (; j + L <= n; j += L) acc = hn::MulAdd(hn::LoadU(d, a + j), hn::LoadU(d, b + j), acc);
    float sum = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; j < n; j++) sum += a[j] * b[j];
    return sum;
}

// Asks for rows (rows × cols numbers, row stride ld) to come into the cache. The layer's tensors
// hold a head's rows 3C or C numbers apart, each row in another page, where the hardware's own
// prefetching does not follow: without this every line of out and dqkv written, and of the next
// head's q, k, v read, waits for memory in turn.
void PrefetchRows(const float* p, size_t ld, int rows, int cols) {
    constexpr int kLine = 64 / sizeof(float);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j += kLine) hwy::Prefetch(p + size_t(r) * ld + j);
}

// The rows [r0, r1) of the head's inputs a block or tile is about to read, asked for ahead: q, k, v;
// with `backward`, out and dout too.
void PrefetchInputs(const FlashHead& hd, bool backward, int r0, int r1) {
    r1 = std::min(r1, hd.T);
    if (r0 >= r1) return;
    for (const float* m : {hd.q, hd.k, hd.v}) PrefetchRows(m + size_t(r0) * hd.ld, hd.ld, r1 - r0, hd.hs);
    if (backward)
        for (const float* m : {hd.out, hd.dout}) PrefetchRows(m + size_t(r0) * hd.ldo, hd.ldo, r1 - r0, hd.hs);
}

// Rows of a sum in working space (row stride lds) into the layer's tensor (row stride ldd), and its
// bf16 copy when there is one.
void WriteRows(float* dst, bf16* dst16, size_t ldd, const float* src, size_t lds, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        std::memcpy(dst + size_t(r) * ldd, src + size_t(r) * lds, sizeof(float) * size_t(cols));
        if (dst16) bf16_round(dst16 + size_t(r) * ldd, src + size_t(r) * lds, size_t(cols));
    }
}

// A product's operand: rows of numbers (float or bf16 pairs), row r at p + r·ld.
template <typename E>
struct Rows {
    const E* p;
    size_t ld;
    const E* at(int r) const { return p + size_t(r) * ld; }
};

// x_j = x_j rounded to bf16 and widened back (exact) for j < n.
void RoundInPlace(float* x, size_t n) {
    const D d;
    const size_t L = hn::Lanes(d);
    size_t j = 0;
    for (; j + L <= n; j += L) hn::StoreU(MaybeRounded(hn::LoadU(d, x + j), true), d, x + j);
    for (; j < n; j++) x[j] = MaybeRounded(x[j], true);
}

// Rows [r0, r1) of a float operand whose rows run along hs into `pad` (Tp, hsp): copied, zero past
// hs (and, when r1 = T, past T up to Tp), and rounded to bf16 when `round`.
void LayRows(float* pad, const float* src, size_t lds, int r0, int r1, int T, int hs, bool round) {
    const int hsp = PadHs(hs), rows_pad = (r1 == T ? PadT(T) : r1) - r0;
    CopyPadded(pad + size_t(r0) * hsp, size_t(hsp), src + size_t(r0) * lds, lds, r1 - r0, hs, rows_pad, round);
}

// The same rows in bf16: in pairs along hs (q16, do16) and in pairs of rows (q2, k2, v2, do2).
void LayRowsInPairs(uint32_t* along_hs, uint32_t* of_rows, const float* src, size_t lds, int r0, int r1, int T,
                    int hs) {
    const int hsp = PadHs(hs), rows_pad = (r1 == T ? PadT(T) : r1) - r0;  // r0 even: a whole tile
    const float* rows = src + size_t(r0) * lds;
    if (along_hs) RoundRows(along_hs + size_t(r0) * hsp / 2, size_t(hsp) / 2, rows, lds, r1 - r0, hs, rows_pad);
    if (of_rows) RoundPairsOfRows(of_rows + size_t(r0 / 2) * hsp, size_t(hsp), rows, lds, r1 - r0, hs, rows_pad);
}

// The key tile of k or v at rows [s0, s1) transposed into the block `dst` ((hs, tile) floats, or
// (hsp/2, tile) bf16 pairs through k16), rounded to bf16 when `round`.
template <typename E>
void LayTile(E* dst, uint32_t* k16, const float* src, size_t lds, int s0, int s1, int hs, bool round) {
    if constexpr (std::is_same_v<E, float>) {
        TransposeTiles(dst, src + size_t(s0) * lds, lds, s1 - s0, hs, kTile, round);
    } else {
        RoundRows(k16, size_t(PadHs(hs)) / 2, src + size_t(s0) * lds, lds, s1 - s0, hs, kTile);
        TransposeTiles(dst, k16, size_t(PadHs(hs)) / 2, kTile, (hs + 1) / 2, kTile);
    }
}

// ---- the forward of one head (F1–F4) ----------------------------------------------------------------
// The operands are laid out block by block, as a block first needs them (block i is the first to read
// q's rows of block i and k's, v's tile i), and the next block's rows are asked for while this one
// runs: a head's rows lie 3C apart, each in another page, where the hardware does not look ahead.
template <class Step>
void ForwardHead(float* out, bf16* out16, float* lse, const FlashHead& hd, const FlashHead* next, float* scratch) {
    using E = typename Step::E;
    constexpr bool kPairs = !std::is_same_v<E, float>, kRound = Step::kRound;
    constexpr int kPer = kPairs ? 2 : 1;  // positions per step of k
    const int T = hd.T, hs = hd.hs, hsp = PadHs(hs);
    const int k_hs = (hs + kPer - 1) / kPer;  // the scores' K, in steps: the rows of a tile of kᵀ
    const size_t ldo = hd.ldo;
    const float scale = 1.0f / std::sqrt(float(hs));
    Carve carve{{scratch}};
    const ForwardSpace sp = forward_space(carve, T, hs, kPairs);
    // The products' operands: the scores' a = q's rows and b = kᵀ (tile by tile); o's b = v (its a is
    // P̃). In bf16 v's rows are pairs of positions, so its step k is positions 2k, 2k + 1.
    const bool copy_q = kRound, copy_v = kRound || hs != hsp;  // float: read in place where possible
    Rows<E> qa, vb;
    E* kt;
    if constexpr (kPairs) {
        qa = {sp.q16, size_t(hsp) / 2}, vb = {sp.v2, size_t(hsp)}, kt = sp.kt2;
    } else {
        qa = copy_q ? Rows<float>{sp.qp, size_t(hsp)} : Rows<float>{hd.q, hd.ld};  // a: any row stride
        vb = copy_v ? Rows<float>{sp.vp, size_t(hsp)} : Rows<float>{hd.v, hd.ld}, kt = sp.kt;
    }
    PrefetchInputs(hd, false, 0, kTile);
    for (int t0 = 0; t0 < T; t0 += kTile) {
        const int t1 = std::min(T, t0 + kTile), rows = t1 - t0;
        PrefetchInputs(hd, false, t1, t1 + kTile);            // the next block's
        if (t1 == T && next) PrefetchInputs(*next, false, 0, kTile);  // the next head's first
        PrefetchRows(out + size_t(t0) * ldo, ldo, rows, hs);  // written at the block's end
        if constexpr (kPairs) {
            LayRowsInPairs(sp.q16, nullptr, hd.q, hd.ld, t0, t1, T, hs);
            LayRowsInPairs(nullptr, sp.v2, hd.v, hd.ld, t0, t1, T, hs);
        } else {
            if (copy_q) LayRows(sp.qp, hd.q, hd.ld, t0, t1, T, hs, kRound);
            if (copy_v) LayRows(sp.vp, hd.v, hd.ld, t0, t1, T, hs, kRound);
        }
        LayTile(kt + size_t(t0) * k_hs, sp.k16, hd.k, hd.ld, t0, t1, hs, kRound);  // kᵀ's tile t0 / kTile
        std::fill(sp.m, sp.m + rows, -std::numeric_limits<float>::infinity());
        std::fill(sp.l, sp.l + rows, 0.0f);
        std::fill(sp.o, sp.o + size_t(rows) * hsp, 0.0f);
        for (int s0 = 0; s0 < t1; s0 += kTile) {  // tiles from t1 on lie above the diagonal: skipped
            const int s1 = std::min(s0 + kTile, t1), off = t0 - s0;
            // F1: raw dot products q_t · k_s (1/√hs comes in the row pass)
            Product<Step>(sp.s, kTile, qa.at(t0), qa.ld, 1, kt + size_t(s0) * k_hs, kTile, rows, kTile, k_hs,
                          Causal::Cols, off, false);
            for (int i = 0; i < rows; i++) {  // F2, F3 on row t = t0 + i, keys s0 .. s0 + n - 1
                const int t = t0 + i, n = std::min(s1, t + 1) - s0;
                float* s_i = sp.s + size_t(i) * kTile;
                const float m_new = std::max(sp.m[i], ScaledMax(s_i, n, scale));
                const float c = std::exp(sp.m[i] - m_new);
                sp.l[i] = c * sp.l[i] + ExpRow(s_i, s_i, n, kTile, scale, m_new);
                sp.m[i] = m_new;
                if (hd.drop.active())
                    dropout_apply_kernel(s_i, s_i, size_t(n), hd.drop, hd.drop_base + size_t(t) * T + s0);
                ScaleRow(sp.o + size_t(i) * hsp, hsp, c);
                // bf16: P̃ rounded as the product's input, after ℓ summed its float values (the scores, m,
                // ℓ and o stay float: lib/layers/flash_attention.h says why)
                if constexpr (kRound) RoundInPlace(s_i, kTile);
                if constexpr (kPairs) RoundRows(sp.p16 + size_t(i) * (kTile / 2), kTile / 2, s_i, kTile, 1, kTile, 1);
            }
            // F3: o += P̃ · v[s0:s1]
            if constexpr (kPairs)
                Product<Step>(sp.o, size_t(hsp), sp.p16, kTile / 2, 1, vb.at(s0 / 2), vb.ld, rows, hsp,
                              (s1 - s0 + 1) / 2, Causal::KEnd, off, true);
            else
                Product<Step>(sp.o, size_t(hsp), sp.s, kTile, 1, vb.at(s0), vb.ld, rows, hsp, s1 - s0, Causal::KEnd,
                              off, true);
        }
        for (int i = 0; i < rows; i++) {  // F4
            DivideRow(sp.o + size_t(i) * hsp, hsp, sp.l[i]);
            lse[t0 + i] = sp.m[i] + std::log(sp.l[i]);
        }
        WriteRows(out + size_t(t0) * ldo, out16 ? out16 + size_t(t0) * ldo : nullptr, ldo, sp.o, size_t(hsp), rows,
                  hs);
    }
}

// ---- the backward of one head (B0–B4) ---------------------------------------------------------------
// The operands are laid out as the forward's are: a key tile's k, v at the tile's start, a row block's
// q, dout (and D) by the first key tile, whose inner loop visits every block in order; and what comes
// next is asked for ahead. dq of block j is final after key tile j (later tiles lie above it) and is
// written then.
template <class Step>
void BackwardHead(const FlashGrads& g, const FlashHead& hd, const FlashHead* next, float* scratch) {
    using E = typename Step::E;
    constexpr bool kPairs = !std::is_same_v<E, float>, kRound = Step::kRound;
    constexpr int kPer = kPairs ? 2 : 1;
    const int T = hd.T, hs = hd.hs, hsp = PadHs(hs);
    const int k_hs = (hs + kPer - 1) / kPer;
    const float *dout = hd.dout, *out = hd.out, *lse = hd.lse;
    const size_t ldo = hd.ldo;
    const float scale = 1.0f / std::sqrt(float(hs));
    Carve carve{{scratch}};
    const BackwardSpace sp = backward_space(carve, T, hs, kPairs);
    // The operands: the scores' a = q's rows, b = kᵀ; dP's a = dout's rows, b = vᵀ (the current key
    // tile's); the b of dv, dk, dq: dout, q, k (their a: P̃ᵀ, dSᵀ, dS), in bf16 pairs of positions.
    const bool copy = kRound || hs != hsp;  // float: q, k, dout read in place where possible
    Rows<E> qa, da, dob, qb, kb;
    E *kt, *vt;
    if constexpr (kPairs) {
        const size_t half = size_t(hsp) / 2;
        qa = {sp.q16, half}, da = {sp.do16, half}, kt = sp.kt2, vt = sp.vt2;
        dob = {sp.do2, size_t(hsp)}, qb = {sp.q2, size_t(hsp)}, kb = {sp.k2, size_t(hsp)};
    } else {
        qa = qb = copy ? Rows<float>{sp.qp, size_t(hsp)} : Rows<float>{hd.q, hd.ld};
        da = dob = copy ? Rows<float>{sp.dop, size_t(hsp)} : Rows<float>{dout, ldo};
        kb = copy ? Rows<float>{sp.kp, size_t(hsp)} : Rows<float>{hd.k, hd.ld};
        kt = sp.kt, vt = sp.vt;
    }
    std::fill(sp.dq, sp.dq + size_t(PadT(T)) * hsp, 0.0f);
    PrefetchInputs(hd, true, 0, kTile);
    for (int s0 = 0; s0 < T; s0 += kTile) {  // a key tile, outside
        const int s1 = std::min(T, s0 + kTile), keys = s1 - s0;
        if (s1 < T) PrefetchInputs(hd, false, s1, s1 + kTile);  // the next tile's k, v (q's rows: in cache by now)
        if (s1 == T && next) PrefetchInputs(*next, true, 0, kTile);
        // written at this tile's end: dk, dv, and dq of the block at the tile (final then)
        for (float* d : {g.dk, g.dv, g.dq}) PrefetchRows(d + size_t(s0) * g.ld, g.ld, keys, hs);
        LayTile(kt, sp.k16, hd.k, hd.ld, s0, s1, hs, kRound);
        LayTile(vt, sp.k16, hd.v, hd.ld, s0, s1, hs, kRound);
        if constexpr (kPairs)
            LayRowsInPairs(nullptr, sp.k2, hd.k, hd.ld, s0, s1, T, hs);
        else if (copy)
            LayRows(sp.kp, hd.k, hd.ld, s0, s1, T, hs, kRound);
        std::fill(sp.dk, sp.dk + size_t(kTile) * hsp, 0.0f);
        std::fill(sp.dv, sp.dv + size_t(kTile) * hsp, 0.0f);
        for (int t0 = s0; t0 < T; t0 += kTile) {  // the row blocks that see it, the diagonal one first
            const int t1 = std::min(T, t0 + kTile), rows = t1 - t0, off = t0 - s0;
            if (s0 == 0) {  // the first key tile visits every block in order: lay out its rows, B0
                if (t1 < T) PrefetchInputs(hd, true, t1, t1 + kTile);
                if constexpr (kPairs) {
                    LayRowsInPairs(sp.q16, sp.q2, hd.q, hd.ld, t0, t1, T, hs);
                    LayRowsInPairs(sp.do16, sp.do2, dout, ldo, t0, t1, T, hs);
                } else if (copy) {
                    LayRows(sp.qp, hd.q, hd.ld, t0, t1, T, hs, kRound);
                    LayRows(sp.dop, dout, ldo, t0, t1, T, hs, kRound);
                }
                for (int t = t0; t < t1; t++) sp.D[t] = DotRow(dout + size_t(t) * ldo, out + size_t(t) * ldo, hs);
            }
            // the scores again (F1's product, the same floats), and B1's dP = dout · vᵀ
            Product<Step>(sp.p, kTile, qa.at(t0), qa.ld, 1, kt, kTile, rows, kTile, k_hs, Causal::Cols, off, false);
            Product<Step>(sp.dp, kTile, da.at(t0), da.ld, 1, vt, kTile, rows, kTile, k_hs, Causal::Cols, off, false);
            const float* pd = hd.drop.active() ? sp.pd : sp.p;  // P̃: P itself without dropout
            for (int i = 0; i < rows; i++) {
                const int t = t0 + i, n = std::min(s1, t + 1) - s0;
                float *p_i = sp.p + size_t(i) * kTile, *dp_i = sp.dp + size_t(i) * kTile;
                ExpRow(p_i, p_i, n, kTile, scale, lse[t]);  // B3's A = exp(S/√hs - lse_t)
                if (hd.drop.active()) {                     // B1's P̃ = A·f and B2's dA = dP·f, one hash
                    float* pd_i = sp.pd + size_t(i) * kTile;
                    dropout_apply2_kernel(pd_i, p_i, dp_i, dp_i, size_t(n), hd.drop, hd.drop_base + size_t(t) * T + s0);
                    std::fill(pd_i + n, pd_i + kTile, 0.0f);
                }
                GradRow(dp_i, p_i, dp_i, n, kTile, sp.D[t], scale);  // B3: dS/√hs
            }
            // B1: dv[s0:s1] += P̃ᵀ · dout[t0:t1];  B4: dk[s0:s1] += dSᵀ · q[t0:t1],  dq[t0:t1] += dS · k[s0:s1]
            const int k_rows = (rows + kPer - 1) / kPer;
            // bf16: P̃ and dS rounded as the products read them, after dS was formed from the float A, dA
            // and D (P itself is not read again)
            if constexpr (kRound) {
                RoundInPlace(sp.dp, size_t(rows) * kTile);
                RoundInPlace(const_cast<float*>(pd), size_t(rows) * kTile);
            }
            if constexpr (kPairs) {
                RoundPairsOfRows(sp.pd2, kTile, pd, kTile, rows, kTile, kTile);
                RoundPairsOfRows(sp.ds2, kTile, sp.dp, kTile, rows, kTile, kTile);
                RoundRows(sp.ds16, kTile / 2, sp.dp, kTile, rows, kTile, rows);
                Product<Step>(sp.dv, size_t(hsp), sp.pd2, 1, kTile, dob.at(t0 / 2), dob.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dk, size_t(hsp), sp.ds2, 1, kTile, qb.at(t0 / 2), qb.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dq + size_t(t0) * hsp, size_t(hsp), sp.ds16, kTile / 2, 1, kb.at(s0 / 2), kb.ld, rows,
                              hsp, (keys + 1) / 2, Causal::KEnd, off, true);
            } else {
                Product<Step>(sp.dv, size_t(hsp), pd, 1, kTile, dob.at(t0), dob.ld, keys, hsp, k_rows, Causal::KBegin,
                              off, true);
                Product<Step>(sp.dk, size_t(hsp), sp.dp, 1, kTile, qb.at(t0), qb.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dq + size_t(t0) * hsp, size_t(hsp), sp.dp, kTile, 1, kb.at(s0), kb.ld, rows, hsp, keys,
                              Causal::KEnd, off, true);
            }
        }
        const auto at = [&](bf16* p) { return p ? p + size_t(s0) * g.ld : nullptr; };
        WriteRows(g.dk + size_t(s0) * g.ld, at(g.dk16), g.ld, sp.dk, size_t(hsp), keys, hs);
        WriteRows(g.dv + size_t(s0) * g.ld, at(g.dv16), g.ld, sp.dv, size_t(hsp), keys, hs);
        WriteRows(g.dq + size_t(s0) * g.ld, at(g.dq16), g.ld, sp.dq + size_t(s0) * hsp, size_t(hsp), keys, hs);
    }
}

// ---- the entry points -----------------------------------------------------------------------------
bool Bf16DotAvailable() {
#if HG_FLASH_BF16_DOT
    static const bool has = cpu_has_bf16_dot();
    return has;
#else
    return false;
#endif
}

void FlashForward(float* out, bf16* out16, float* lse, const FlashHead& head, const FlashHead* next,
                  FlashProducts products, float* scratch) {
    if (products == FlashProducts::Float) return ForwardHead<FloatStep>(out, out16, lse, head, next, scratch);
#if HG_FLASH_BF16_DOT
    if (products == FlashProducts::Bf16Dot && Bf16DotAvailable())
        return ForwardHead<DotStep>(out, out16, lse, head, next, scratch);
#endif
    ForwardHead<RoundedStep>(out, out16, lse, head, next, scratch);
}

void FlashBackward(const FlashGrads& grads, const FlashHead& head, const FlashHead* next, FlashProducts products,
                   float* scratch) {
    if (products == FlashProducts::Float) return BackwardHead<FloatStep>(grads, head, next, scratch);
#if HG_FLASH_BF16_DOT
    if (products == FlashProducts::Bf16Dot && Bf16DotAvailable())
        return BackwardHead<DotStep>(grads, head, next, scratch);
#endif
    BackwardHead<RoundedStep>(grads, head, next, scratch);
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(FlashForward);
HWY_EXPORT(FlashBackward);
HWY_EXPORT(Bf16DotAvailable);

size_t flash_head_scratch(int T, int hs, FlashProducts products) {
    size_t most = 0;
    for (bool pairs : {false, true}) {  // Bf16Dot lays its operands out in pairs where it runs
        if (pairs && products != FlashProducts::Bf16Dot) continue;
        flash_space::Carve forward{{nullptr}}, backward{{nullptr}};
        flash_space::forward_space(forward, T, hs, pairs);
        flash_space::backward_space(backward, T, hs, pairs);
        most = std::max({most, forward.used, backward.used});
    }
    return most;
}

bool flash_bf16_dot_available() { return HWY_DYNAMIC_DISPATCH(Bf16DotAvailable)(); }

void flash_head_forward(float* out, bf16* out16, float* lse, const FlashHead& head, const FlashHead* next,
                        FlashProducts products, float* scratch) {
    HWY_DYNAMIC_DISPATCH(FlashForward)(out, out16, lse, head, next, products, scratch);
}

void flash_head_backward(const FlashGrads& grads, const FlashHead& head, const FlashHead* next,
                         FlashProducts products, float* scratch) {
    HWY_DYNAMIC_DISPATCH(FlashBackward)(grads, head, next, products, scratch);
}

}  // namespace hg
#endif
