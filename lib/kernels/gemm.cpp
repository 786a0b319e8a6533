// gemm.cpp — Highway implementation of gemm.h, compiled for every target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/gemm.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>

#include "lib/kernels/gemm.h"

#ifndef HG_GEMM_BLOCKS
#define HG_GEMM_BLOCKS
namespace hg::gemm_blocks {
// KC·NC floats of b packed (128 KB); MC rows of a (MC·KC floats, 96 KB) are read while in L2.
constexpr int KC = 256, NC = 128, MC = 96;
// An operand as op(x)(i, k) = x[i·rs + k·cs]: one of rs, cs is 1, the other the leading dimension.
struct View {
    const float* p;
    size_t rs, cs;
};
}  // namespace hg::gemm_blocks
#endif

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace hg::gemm_blocks;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Rows of the micro-kernel's tile: 12 (24 accumulators) with AVX-512's 32 vector registers,
// 8 with NEON's / SVE's 32, 6 (12 accumulators, 2 of b, 1 broadcast) where there are 16.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kMR = 12;
#elif HWY_ARCH_ARM && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
constexpr int kMR = 8;
#else
constexpr int kMR = 6;
#endif

// a transposed, a tile's rows i0..i0+mr (mr < kMR) of op(a), columns 0..kc, into a panel of kMR
// rows, k-major (rows past mr zero): in place the tile would read past the matrix's end.
static void PackTail(float* HWY_RESTRICT ap, const float* a, size_t lda, int mr, int kc) {
    for (int k = 0; k < kc; k++, ap += kMR)
        for (int r = 0; r < kMR; r++) ap[r] = r < mr ? a[size_t(k) * lda + r] : 0.0f;
}

// Panels of nr columns of op(b) rows 0..kc, columns 0..n: panel p at bp + p·nr·kc, k-major. The
// last panel is nr / 2 (one vector) wide when that holds what is left (PanelWidth).
static int PanelWidth(int left, int nr) { return left >= nr || left > nr / 2 ? nr : std::max(1, nr / 2); }

static void PackB(float* HWY_RESTRICT bp, View b, int n, int kc, int nr_full) {
    for (int j0 = 0; j0 < n; j0 += nr_full) {
        const int nr = PanelWidth(n - j0, nr_full), w = std::min(nr, n - j0);
        float* dst = bp + size_t(j0) * kc;
        if (b.cs == 1) {  // op(b)'s row k is contiguous
            for (int k = 0; k < kc; k++) {
                const float* src = b.p + size_t(k) * b.rs + j0;
                float* row = dst + size_t(k) * nr;
                std::copy(src, src + w, row);
                std::fill(row + w, row + nr, 0.0f);
            }
        } else {  // b transposed: op(b)'s column j is contiguous
            for (int j = 0; j < nr; j++) {
                const float* src = b.p + size_t(j0 + j) * b.cs;
                for (int k = 0; k < kc; k++) dst[size_t(k) * nr + j] = j < w ? src[k] : 0.0f;
            }
        }
    }
}

// c's row r of the tile: alpha·acc + beta·c (beta 0: c is not read), `w` of its NV·L columns.
template <int NV>
static HWY_INLINE void StoreRow(D d, V acc0, V acc1, float* c, int w, float alpha, float beta) {
    const size_t L = hn::Lanes(d);
    const V va = hn::Set(d, alpha), vb = hn::Set(d, beta);
    if (size_t(w) == NV * L) {
        V o0 = hn::Mul(va, acc0), o1 = hn::Mul(va, acc1);
        if (beta != 0) {
            o0 = hn::Add(o0, hn::Mul(vb, hn::LoadU(d, c)));
            if (NV > 1) o1 = hn::Add(o1, hn::Mul(vb, hn::LoadU(d, c + L)));
        }
        hn::StoreU(o0, d, c);
        if (NV > 1) hn::StoreU(o1, d, c + L);
        return;
    }
    // The same vector operations through a buffer, so an element rounds alike wherever it lies.
    HWY_ALIGN float buf[2 * HWY_MAX_BYTES / sizeof(float)] = {};
    if (beta != 0) std::copy(c, c + w, buf);
    V o0 = hn::Mul(va, acc0), o1 = hn::Mul(va, acc1);
    if (beta != 0) {
        o0 = hn::Add(o0, hn::Mul(vb, hn::LoadU(d, buf)));
        o1 = hn::Add(o1, hn::Mul(vb, hn::LoadU(d, buf + L)));
    }
    hn::StoreU(o0, d, buf), hn::StoreU(o1, d, buf + L);
    std::copy(buf, buf + w, c);
}

// The micro-kernel: the tile of c at c (mr rows, w columns of it inside c) from kMR rows of
// op(a) and one panel of b (NV·L columns), kc deep. op(a): row r's element k at arow[r][k]
// (rows past mr repeat a valid row: computed, never stored), or when kColumns (a transposed)
// at arow[0][k·ks + r].
template <int NV, bool kColumns>
static HWY_NOINLINE void Tile(const float* const* arow, size_t ks, const float* HWY_RESTRICT bp, int kc,
                              float* c, size_t ldc, int mr, int w, float alpha, float beta) {
    const D d;
    const size_t L = hn::Lanes(d);
    V c00 = hn::Zero(d), c01 = hn::Zero(d), c10 = hn::Zero(d), c11 = hn::Zero(d);
    V c20 = hn::Zero(d), c21 = hn::Zero(d), c30 = hn::Zero(d), c31 = hn::Zero(d);
    V c40 = hn::Zero(d), c41 = hn::Zero(d), c50 = hn::Zero(d), c51 = hn::Zero(d);
    V c60 = hn::Zero(d), c61 = hn::Zero(d), c70 = hn::Zero(d), c71 = hn::Zero(d);
    V c80 = hn::Zero(d), c81 = hn::Zero(d), c90 = hn::Zero(d), c91 = hn::Zero(d);
    V cA0 = hn::Zero(d), cA1 = hn::Zero(d), cB0 = hn::Zero(d), cB1 = hn::Zero(d);
#define HG_GEMM_ROW(r)                                  \
    {                                                   \
        const V x = hn::Set(d, kColumns ? a0[at + 0x##r] : a##r[at]); \
        c##r##0 = hn::MulAdd(x, b0, c##r##0);           \
        if (NV > 1) c##r##1 = hn::MulAdd(x, b1, c##r##1); \
    }
    const float *a0 = arow[0], *a1 = arow[1], *a2 = arow[2], *a3 = arow[3], *a4 = arow[4], *a5 = arow[5];
    const float *a6 = arow[kMR > 6 ? 6 : 0], *a7 = arow[kMR > 7 ? 7 : 0], *a8 = arow[kMR > 8 ? 8 : 0];
    const float *a9 = arow[kMR > 9 ? 9 : 0], *aA = arow[kMR > 10 ? 10 : 0], *aB = arow[kMR > 11 ? 11 : 0];
    size_t at = 0;
    for (int k = 0; k < kc; k++, at += ks, bp += NV * L) {
        const V b0 = hn::LoadU(d, bp), b1 = NV > 1 ? hn::LoadU(d, bp + L) : b0;
        HG_GEMM_ROW(0) HG_GEMM_ROW(1) HG_GEMM_ROW(2) HG_GEMM_ROW(3) HG_GEMM_ROW(4) HG_GEMM_ROW(5)
        if constexpr (kMR > 6) { HG_GEMM_ROW(6) HG_GEMM_ROW(7) }
        if constexpr (kMR > 8) { HG_GEMM_ROW(8) HG_GEMM_ROW(9) HG_GEMM_ROW(A) HG_GEMM_ROW(B) }
    }
#undef HG_GEMM_ROW
    StoreRow<NV>(d, c00, c01, c, w, alpha, beta);
    if (mr > 1) StoreRow<NV>(d, c10, c11, c + ldc, w, alpha, beta);
    if (mr > 2) StoreRow<NV>(d, c20, c21, c + 2 * ldc, w, alpha, beta);
    if (mr > 3) StoreRow<NV>(d, c30, c31, c + 3 * ldc, w, alpha, beta);
    if (mr > 4) StoreRow<NV>(d, c40, c41, c + 4 * ldc, w, alpha, beta);
    if (mr > 5) StoreRow<NV>(d, c50, c51, c + 5 * ldc, w, alpha, beta);
    if (mr > 6) StoreRow<NV>(d, c60, c61, c + 6 * ldc, w, alpha, beta);
    if (mr > 7) StoreRow<NV>(d, c70, c71, c + 7 * ldc, w, alpha, beta);
    if (mr > 8) StoreRow<NV>(d, c80, c81, c + 8 * ldc, w, alpha, beta);
    if (mr > 9) StoreRow<NV>(d, c90, c91, c + 9 * ldc, w, alpha, beta);
    if (mr > 10) StoreRow<NV>(d, cA0, cA1, c + 10 * ldc, w, alpha, beta);
    if (mr > 11) StoreRow<NV>(d, cB0, cB1, c + 11 * ldc, w, alpha, beta);
}

void Gemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda, int ldb,
          int ldc, float alpha, float beta) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // no terms: c = beta·c (beta 0: zeros, c not read)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float& out = c[size_t(i) * ldc + j];
                out = beta == 0 ? 0.0f : beta * out;
            }
        return;
    }
    const D d;
    const int nr = int(2 * hn::Lanes(d));
    const int nc = std::max(nr, NC / nr * nr);
    HWY_ALIGN float bpack[size_t(KC) * std::max(NC, 2 * int(HWY_MAX_BYTES / sizeof(float)))];
    HWY_ALIGN float apack[size_t(kMR) * KC];  // a transposed: the tail tile's rows
    const size_t b_rs = tb ? 1 : size_t(ldb), b_cs = tb ? size_t(ldb) : 1;
    for (int jc = 0; jc < N; jc += nc) {
        const int n = std::min(nc, N - jc);
        for (int pc = 0; pc < K; pc += KC) {
            const int kc = std::min(KC, K - pc);
            const float beta_k = pc == 0 ? beta : 1.0f;
            PackB(bpack, View{b + pc * b_rs + jc * b_cs, b_rs, b_cs}, n, kc, nr);
            for (int ic = 0; ic < M; ic += MC) {
                const int m = std::min(MC, M - ic);
                const int tail = m % kMR;  // rows in a last tile shorter than kMR
                if (ta && tail) PackTail(apack, a + size_t(pc) * lda + ic + m - tail, size_t(lda), tail, kc);
                for (int jr = 0; jr < n; jr += nr)
                    for (int ir = 0; ir < m; ir += kMR) {
                        const int mr = std::min(kMR, m - ir);
                        const float* arow[kMR];
                        size_t ks = 1;
                        for (int r = 0; r < kMR; r++)
                            arow[r] = ta ? (mr < kMR ? apack : a + size_t(pc) * lda + ic + ir)
                                         : a + size_t(ic + ir + std::min(r, mr - 1)) * lda + pc;
                        if (ta) ks = mr < kMR ? size_t(kMR) : size_t(lda);
                        const float* bp = bpack + size_t(jr) * kc;
                        float* cp = c + size_t(ic + ir) * ldc + jc + jr;
                        const int w = std::min(nr, n - jr);
                        const bool wide = PanelWidth(n - jr, nr) == nr;
                        const auto tile = ta ? (wide ? Tile<2, true> : Tile<1, true>)
                                             : (wide ? Tile<2, false> : Tile<1, false>);
                        tile(arow, ks, bp, kc, cp, size_t(ldc), mr, w, alpha, beta_k);
                    }
            }
        }
    }
}

}  // namespace hg::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg {
HWY_EXPORT(Gemm);

void gemm(bool ta, bool tb, float* c, const float* a, const float* b, int M, int N, int K, int lda, int ldb,
          int ldc, float alpha, float beta) {
    HWY_DYNAMIC_DISPATCH(Gemm)(ta, tb, c, a, b, M, N, K, lda, ldb, ldc, alpha, beta);
}

}  // namespace hg
#endif
