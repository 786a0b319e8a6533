// flash_tile_products-inl.h — the small matrix products of the flash layer's tiles
// (flash_attention_kernels.cpp): a register-blocked c (=, +=) a·b for float operands, float
// operands holding bf16 numbers, and bf16 pairs (AVX512_BF16's dot product), and the part of a
// product the causal mask leaves. Included inside a kernel file's per-target code; the guard lets
// foreach_target.h include it once per target.
#if defined(HANDGRAD_KERNELS_FLASH_TILE_PRODUCTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HANDGRAD_KERNELS_FLASH_TILE_PRODUCTS_INL_H_
#undef HANDGRAD_KERNELS_FLASH_TILE_PRODUCTS_INL_H_
#else
#define HANDGRAD_KERNELS_FLASH_TILE_PRODUCTS_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lib/kernels/bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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
// The dot products' operands in bf16, rounded by AVX512_BF16's own conversions: vcvtneps2bf16 (a
// vector of floats to bf16) and vcvtne2ps2bf16 (two vectors, one in each half: pairs along a row as
// they stand, or pairs of rows once vpermw interleaves them). They round to nearest even as
// bf16_from_float does, but read a subnormal input as 0 and write 0 for a subnormal result, as
// vdpbf16ps reads its operands: the products are the same. They run only where DotStep does.
HWY_INLINE void StoreBf16Operand(V x, bf16* out) {
    __m256i r;
    __asm__("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(x.raw));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), r);
}
// lo's 16 numbers rounded to bf16, then hi's, in order: 16 pairs along a row (pair j: numbers 2j, 2j + 1).
HWY_INLINE __m512i PairsAlong(__m512 lo, __m512 hi) {
    __m512i pairs;
    __asm__("vcvtne2ps2bf16 %2, %1, %0" : "=v"(pairs) : "v"(hi), "v"(lo));
    return pairs;
}
// Pair j: even's lane j in the low half, odd's in the high half.
HWY_INLINE VU PairBf16Operands(V even, V odd) {
    const __m512i halves = PairsAlong(even.raw, odd.raw);  // even's 16 bf16, then odd's
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return VU{_mm512_permutexvar_epi16(interleave, halves)};
}
#else
#define HG_FLASH_BF16_DOT 0
HWY_INLINE void StoreBf16Operand(V x, bf16* out) { StoreBf16(D(), x, out); }
HWY_INLINE VU PairBf16Operands(V even, V odd) {
    return hn::Or(Bf16Bits(D(), even), hn::ShiftLeft<16>(Bf16Bits(D(), odd)));
}
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

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
