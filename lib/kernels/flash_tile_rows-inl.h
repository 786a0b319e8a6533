// flash_tile_rows-inl.h — the flash layer's passes over rows (flash_attention_kernels.cpp): laying
// the operands out (transposed tile by tile, padded, rounded to bf16, in pairs), the rows of a tile
// (a row's max; then its exp and dropout, and in the backward the softmax's gradient, in one pass),
// prefetching a head's rows and writing the results. Included inside a kernel file's per-target
// code; the guard lets foreach_target.h include it once per target.
#if defined(HANDGRAD_KERNELS_FLASH_TILE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_FLASH_TILE_ROWS_INL_H_
#undef HANDGRAD_KERNELS_FLASH_TILE_ROWS_INL_H_
#else
#define HANDGRAD_KERNELS_FLASH_TILE_ROWS_INL_H_
#endif

#include <hwy/highway.h>
#include <hwy/cache_control.h>  // hwy::Prefetch

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lib/kernels/bf16-inl.h"
#include "lib/kernels/dropout-inl.h"
#include "lib/kernels/exp-inl.h"
#include "lib/kernels/flash_attention_kernels.h"
#include "lib/kernels/flash_space.h"
#include "lib/kernels/flash_tile_products-inl.h"  // D, V

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace hg::flash_space;

// ---- laying the operands out --------------------------------------------------------------------
// v, or v rounded to bf16 and widened back (exact) when `round`.
HWY_INLINE V MaybeRounded(V v, bool round) {
    return round ? hn::BitCast(D(), hn::ShiftLeft<16>(Bf16Bits(D(), v))) : v;
}
inline float MaybeRounded(float x, bool round) { return round ? bf16_to_float(bf16_from_float(x)) : x; }

// src (rows, cols), row stride lds, transposed into tiles: the transpose of rows [j·kTile, (j+1)·kTile)
// is block j of dst, (cols, kTile) with row stride kTile, at dst + j·cols·kTile; zero past rows, up to
// rows_pad (a whole number of tiles), rounded to bf16 when `round`. A key tile of kᵀ or vᵀ is then one
// contiguous block: with a row stride of Tp instead, its rows 4 KiB apart (T 1024) would share a few
// sets of L1 and evict each other. A vector of a block's row gathers column j of a vector's worth of
// src's rows.
void TransposeTiles(float* dst, const float* src, size_t lds, int rows, int cols, int rows_pad, bool round) {
    const D d;
    const hn::RebindToSigned<D> di;
    const int L = int(hn::Lanes(d));  // divides kTile
    const auto at = hn::Mul(hn::Iota(di, 0), hn::Set(di, int32_t(lds)));  // lds·3·T fits an int32 (the layer's size)
    auto out = [&](int j, int r) { return dst + size_t(r / kTile) * cols * kTile + size_t(j) * kTile + r % kTile; };
    int r = 0;
    for (; r + L <= rows; r += L)
        for (int j = 0; j < cols; j++)
            hn::StoreU(MaybeRounded(hn::GatherIndex(d, src + size_t(r) * lds + j, at), round), d, out(j, r));
    for (; r < rows; r++)
        for (int j = 0; j < cols; j++) *out(j, r) = MaybeRounded(src[size_t(r) * lds + j], round);
    for (; r < rows_pad; r++)
        for (int j = 0; j < cols; j++) *out(j, r) = 0.0f;
}

#if HG_FLASH_BF16_DOT
// x[0 .. 16) transposed in registers, as 16 rows of 16 numbers: 32-bit pairs of rows interleaved,
// then 64-bit pairs, then 128-bit blocks exchanged between the vectors twice.
HWY_INLINE void Transpose16(__m512i x[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
    }
    // x[4i + k]'s 128-bit block b: column 4b + k of rows 4i .. 4i + 3
    for (int i = 0; i < 16; i += 4) {
        x[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        x[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        x[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        x[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int k = 0; k < 4; k++) {  // column 4b + k: block b of x[k], x[4 + k], x[8 + k], x[12 + k]
        const __m512i lo01 = _mm512_shuffle_i32x4(x[k], x[4 + k], 0x44);  // blocks 0, 1 of each
        const __m512i lo23 = _mm512_shuffle_i32x4(x[k], x[4 + k], 0xEE);  // blocks 2, 3
        const __m512i hi01 = _mm512_shuffle_i32x4(x[8 + k], x[12 + k], 0x44);
        const __m512i hi23 = _mm512_shuffle_i32x4(x[8 + k], x[12 + k], 0xEE);
        t[k] = _mm512_shuffle_i32x4(lo01, hi01, 0x88), t[4 + k] = _mm512_shuffle_i32x4(lo01, hi01, 0xDD);
        t[8 + k] = _mm512_shuffle_i32x4(lo23, hi23, 0x88), t[12 + k] = _mm512_shuffle_i32x4(lo23, hi23, 0xDD);
    }
    for (int i = 0; i < 16; i++) x[i] = t[i];
}

// dst ((hs + 1)/2, kTile), row stride kTile = src's rows [0, rows) (row stride lds, hs numbers each)
// rounded to bf16 in pairs along hs, transposed; zero past rows and hs (a tile of keys:
// TransposeTiles' block in pairs). Each 16 rows of 16 pairs are rounded into registers and moved
// there, 16 × 16 at a time, rather than gathered.
void TransposeTilePairs(uint32_t* dst, const float* src, size_t lds, int rows, int hs) {
    const int cols = (hs + 1) / 2;
    for (int c0 = 0; c0 < cols; c0 += 16) {
        const int n = std::min(16, cols - c0), numbers = std::min(32, hs - 2 * c0);
        const __mmask16 lo = __mmask16((1u << std::min(16, numbers)) - 1);     // the pairs 0 .. 7 of the row
        const __mmask16 hi = __mmask16((1u << std::max(0, numbers - 16)) - 1);  // 8 .. 15
        for (int r0 = 0; r0 < kTile; r0 += 16) {
            __m512i x[16];
            for (int i = 0; i < 16; i++) {
                const float* in = src + size_t(r0 + i) * lds + 2 * c0;
                x[i] = r0 + i < rows ? PairsAlong(_mm512_maskz_loadu_ps(lo, in), _mm512_maskz_loadu_ps(hi, in + 16))
                                     : _mm512_setzero_si512();
            }
            Transpose16(x);
            for (int j = 0; j < n; j++) _mm512_storeu_si512(dst + size_t(c0 + j) * kTile + r0, x[j]);
        }
    }
}
#endif

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
            for (; j < vec; j += L) StoreBf16Operand(hn::LoadU(d, in + j), reinterpret_cast<bf16*>(out) + j);
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
        for (; j + L <= n; j += L)
            hn::StoreU(PairBf16Operands(hn::LoadU(d, even + j), odd ? hn::LoadU(d, odd + j) : hn::Zero(d)), du, out + j);
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

// F2, F3 on one row of a tile, in one pass, once its max is known: P_j = exp(x_j·scale - shift) for
// the visible keys j < n, P̃_j = P_j·f_j (f_j = 1/(1 - p) where the dropout keeps the row's element j,
// counted from i0 in its mask, else 0; 1 without dropout), 0 from n to width (a whole number of
// vectors); put(j, P̃_j .. P̃_{j+L-1}) for each vector, which stores it as the product will read it.
// Returns Σ_j P_j (ℓ sums the probabilities before dropout).
template <class Put>
HWY_INLINE float ExpDropRow(const float* x, int n, int width, float scale, float shift, const Dropout& drop,
                            size_t i0, Put put) {
    const D d;
    const int L = int(hn::Lanes(d));
    const V vs = hn::Set(d, scale), vshift = hn::Set(d, shift), vf = hn::Set(d, drop.scale());
    const KeepLanes keep(drop, i0);
    V sum = hn::Zero(d);
    int j = 0;
    for (; j < n; j += L) {
        const V e = ExpFlushed(d, hn::Sub(hn::Mul(hn::LoadU(d, x + j), vs), vshift));
        const V p = hn::IfThenElseZero(hn::FirstN(d, size_t(n - j)), e);
        sum = hn::Add(sum, p);
        put(j, drop.active() ? hn::IfThenElseZero(keep.at(d, size_t(j)), hn::Mul(p, vf)) : p);
    }
    for (; j < width; j += L) put(j, hn::Zero(d));
    return hn::GetLane(hn::SumOfLanes(d, sum));
}

// One row of a tile in the backward: its scores S (raw dot products) and dP, its visible keys n, its
// lse_t and D_t, and where its run of the dropout's mask starts.
struct GradRowIn {
    const float *s, *dp;
    int n;
    float lse, D;
    KeepLanes keep;
};

// B1–B3 on two rows of a tile, a and b (the rows a bf16 pair of rows holds together; b.n = 0 where
// there is none), in one pass: A = exp(S·scale - lse_t), P̃ = A·f and dA = dP·f (f as in ExpDropRow, one
// hash for both), dS = scale·A·(dA - D_t) on the visible keys, 0 from n to width; put(j, P̃_a, dS_a,
// P̃_b, dS_b) for each vector of columns [j, j + L).
template <class Put>
HWY_INLINE void GradRowPair(const GradRowIn& a, const GradRowIn& b, int width, float scale, const Dropout& drop,
                            Put put) {
    const D d;
    const int L = int(hn::Lanes(d)), n = std::max(a.n, b.n);
    const V vs = hn::Set(d, scale), vf = hn::Set(d, drop.scale());
    const auto row = [&](const GradRowIn& r, int j, V& pd, V& ds) HWY_ATTR {
        const auto visible = hn::FirstN(d, size_t(std::max(0, r.n - j)));
        const V A = hn::IfThenElseZero(visible, ExpFlushed(d, hn::Sub(hn::Mul(hn::LoadU(d, r.s + j), vs),
                                                                        hn::Set(d, r.lse))));
        V dA = hn::LoadU(d, r.dp + j);
        pd = A;
        if (drop.active()) {
            const auto kept = r.keep.at(d, size_t(j));
            pd = hn::IfThenElseZero(kept, hn::Mul(A, vf));
            dA = hn::IfThenElseZero(kept, hn::Mul(dA, vf));
        }
        ds = hn::IfThenElseZero(visible, hn::Mul(hn::Mul(A, vs), hn::Sub(dA, hn::Set(d, r.D))));
    };
    int j = 0;
    for (; j < n; j += L) {
        V pa, sa, pb, sb;
        row(a, j, pa, sa);
        row(b, j, pb, sb);
        put(j, pa, sa, pb, sb);
    }
    for (; j < width; j += L) put(j, hn::Zero(d), hn::Zero(d), hn::Zero(d), hn::Zero(d));
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

// Σ_j a_j·b_j over n numbers (lanes, then a scalar tail); b in float, or in bf16 widened exactly.
inline V LoadRow(const float* p) { return hn::LoadU(D(), p); }
inline V LoadRow(const bf16* p) { return LoadBf16AsFloat(D(), p); }
inline float ToFloat(float x) { return x; }
inline float ToFloat(bf16 x) { return bf16_to_float(x); }

template <typename B>
float DotRow(const float* a, const B* b, int n) {
    const D d;
    const int L = int(hn::Lanes(d));
    V acc = hn::Zero(d);
    int j = 0;
    for (; j + L <= n; j += L) acc = hn::MulAdd(hn::LoadU(d, a + j), LoadRow(b + j), acc);
    float sum = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; j < n; j++) sum += a[j] * ToFloat(b[j]);
    return sum;
}

// Asks for rows (rows × cols numbers, row stride ld) to come into the cache. The layer's tensors
// hold a head's rows 3C or C numbers apart, each row in another page, where the hardware's own
// prefetching does not follow: without this every line of out and dqkv written, and of the next
// head's q, k, v read, waits for memory in turn.
template <typename E>
void PrefetchRows(const E* p, size_t ld, int rows, int cols) {
    constexpr int kLine = 64 / sizeof(E);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j += kLine) hwy::Prefetch(p + size_t(r) * ld + j);
}

// The rows [r0, r1) of the head's inputs a block or tile is about to read, asked for ahead: q, k, v;
// with `backward`, out (or out16) and dout too.
void PrefetchInputs(const FlashHead& hd, bool backward, int r0, int r1) {
    r1 = std::min(r1, hd.T);
    if (r0 >= r1) return;
    for (const float* m : {hd.q, hd.k, hd.v}) PrefetchRows(m + size_t(r0) * hd.ld, hd.ld, r1 - r0, hd.hs);
    if (!backward) return;
    PrefetchRows(hd.dout + size_t(r0) * hd.ldo, hd.ldo, r1 - r0, hd.hs);
    if (hd.out) PrefetchRows(hd.out + size_t(r0) * hd.ldo, hd.ldo, r1 - r0, hd.hs);
    if (hd.out16) PrefetchRows(hd.out16 + size_t(r0) * hd.ldo, hd.ldo, r1 - r0, hd.hs);
}

// Rows of a sum in working space (row stride lds) into the layer's tensor (row stride ldd) and its
// bf16 copy, each where not null.
void WriteRows(float* dst, bf16* dst16, size_t ldd, const float* src, size_t lds, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        if (dst) std::memcpy(dst + size_t(r) * ldd, src + size_t(r) * lds, sizeof(float) * size_t(cols));
        if (dst16) StoreBf16Run(D(), src + size_t(r) * lds, dst16 + size_t(r) * ldd, size_t(cols));
    }
}

// A product's operand: rows of numbers (float or bf16 pairs), row r at p + r·ld.
template <typename E>
struct Rows {
    const E* p;
    size_t ld;
    const E* at(int r) const { return p + size_t(r) * ld; }
};

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

// The key tile of k or v at rows [s0, s1) transposed into the block `dst` ((hs, tile) floats, rounded
// to bf16 when `round`; or ((hs + 1)/2, tile) bf16 pairs), zero past s1.
template <typename E>
void LayTile(E* dst, const float* src, size_t lds, int s0, int s1, int hs, bool round) {
    if constexpr (std::is_same_v<E, float>) {
        TransposeTiles(dst, src + size_t(s0) * lds, lds, s1 - s0, hs, kTile, round);
    } else {
#if HG_FLASH_BF16_DOT  // bf16 pairs: only where DotStep runs
        TransposeTilePairs(dst, src + size_t(s0) * lds, lds, s1 - s0, hs);
#else
        static_assert(!sizeof(E), "bf16 pairs are laid out only where DotStep runs");
#endif
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
