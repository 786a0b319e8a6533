// gemm.cpp — Highway implementation of gemm.h, compiled for every target by foreach_target.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/gemm.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lib/core/thread_buffer.h"
#include "lib/kernels/gemm.h"

#ifndef HG_GEMM_BLOCKS
#define HG_GEMM_BLOCKS
namespace hg::gemm_blocks {
// KC·NC floats for b's packed block (a 1 MiB buffer; half of it used where a panel's K block is
// cut to fit L1, as on AVX-512); MC rows of a (MC·KC floats, 96 KB) are read while in L2. MC is
// a multiple of every kMR below.
constexpr int KC = 256, NC = 1024, MC = 96;
// An operand as op(x)(i, k) = x[i·rs + k·cs]: one of rs, cs is 1, the other the leading dimension.
struct View {
    const float* p;
    size_t rs, cs;
};
struct PackedBlockOfB;  // names this thread's buffer for op(b)'s packed block (thread_buffer.h)
}  // namespace hg::gemm_blocks
#endif

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace hg::gemm_blocks;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// The micro-kernel's tile: kMR rows × kNV vectors of columns, kMR·kNV accumulators. 24 of the
// 32 vector registers of AVX-512, NEON and SVE; 12 of SSE's / AVX2's 16 (with 2 of b and 1
// broadcast beside them).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kMR = 6, kNV = 4;
#elif HWY_ARCH_ARM && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
constexpr int kMR = 8, kNV = 3;
#else
constexpr int kMR = 6, kNV = 2;
#endif

// a transposed, a tile's rows i0..i0+mr (mr < kMR) of op(a), columns 0..kc, into a panel of kMR
// rows, k-major (rows past mr zero): in place the tile would read past the matrix's end.
static void PackTail(float* HWY_RESTRICT ap, const float* a, size_t lda, int mr, int kc) {
    for (int k = 0; k < kc; k++, ap += kMR)
        for (int r = 0; r < kMR; r++) ap[r] = r < mr ? a[size_t(k) * lda + r] : 0.0f;
}

// Panels of nr columns of op(b) rows 0..kc, columns 0..n: panel p at bp + p·nr·kc, k-major. The
// last panel is as many vectors wide as what is left needs (PanelWidth).
static int PanelWidth(int left, int nr, int L) { return left >= nr ? nr : (left + L - 1) / L * L; }

static void PackB(float* HWY_RESTRICT bp, View b, int n, int kc, int nr_full, int L) {
    for (int j0 = 0; j0 < n; j0 += nr_full) {
        const int nr = PanelWidth(n - j0, nr_full, L), w = std::min(nr, n - j0);
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

// c's row of the tile: alpha·acc + beta·c (beta 0: c is not read), `w` of its NV·L columns.
template <int NV>
static HWY_INLINE void StoreRow(D d, V acc0, V acc1, V acc2, V acc3, float* c, int w, float alpha, float beta) {
    const size_t L = hn::Lanes(d);
    const V va = hn::Set(d, alpha), vb = hn::Set(d, beta);
    // Full width in place; a part through a buffer with the same vector operations, so an
    // element rounds alike wherever it lies.
    HWY_ALIGN float buf[4 * HWY_MAX_BYTES / sizeof(float)];
    float* out = c;
    if (size_t(w) != NV * L) {
        out = buf;
        std::fill(buf, buf + NV * L, 0.0f);
        if (beta != 0) std::copy(c, c + w, buf);
    }
    const auto one = [&](V acc, float* at) HWY_ATTR {
        V o = hn::Mul(va, acc);
        if (beta != 0) o = hn::Add(o, hn::Mul(vb, hn::LoadU(d, at)));
        hn::StoreU(o, d, at);
    };
    one(acc0, out);
    if constexpr (NV > 1) one(acc1, out + L);
    if constexpr (NV > 2) one(acc2, out + 2 * L);
    if constexpr (NV > 3) one(acc3, out + 3 * L);
    if (out == buf) std::copy(buf, buf + w, c);
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
#define HG_GEMM_ACC(r)                                                                        \
    V c##r##0 = hn::Zero(d), c##r##1 = hn::Zero(d), c##r##2 = hn::Zero(d), c##r##3 = hn::Zero(d); \
    const float* a##r = arow[std::min(0x##r, kMR - 1)];
    HG_GEMM_ACC(0) HG_GEMM_ACC(1) HG_GEMM_ACC(2) HG_GEMM_ACC(3) HG_GEMM_ACC(4) HG_GEMM_ACC(5)
    HG_GEMM_ACC(6) HG_GEMM_ACC(7)
#undef HG_GEMM_ACC
#define HG_GEMM_ROW(r)                                                     \
    if constexpr (kMR > 0x##r) {                                           \
        const V x = hn::Set(d, kColumns ? a0[at + 0x##r] : a##r[at]);      \
        c##r##0 = hn::MulAdd(x, b0, c##r##0);                              \
        if constexpr (NV > 1) c##r##1 = hn::MulAdd(x, b1, c##r##1);        \
        if constexpr (NV > 2) c##r##2 = hn::MulAdd(x, b2, c##r##2);        \
        if constexpr (NV > 3) c##r##3 = hn::MulAdd(x, b3, c##r##3);        \
    }
    size_t at = 0;
    for (int k = 0; k < kc; k++, at += ks, bp += NV * L) {
        const V b0 = hn::LoadU(d, bp);
        const V b1 = NV > 1 ? hn::LoadU(d, bp + L) : b0, b2 = NV > 2 ? hn::LoadU(d, bp + 2 * L) : b0;
        const V b3 = NV > 3 ? hn::LoadU(d, bp + 3 * L) : b0;
        HG_GEMM_ROW(0) HG_GEMM_ROW(1) HG_GEMM_ROW(2) HG_GEMM_ROW(3)
        HG_GEMM_ROW(4) HG_GEMM_ROW(5) HG_GEMM_ROW(6) HG_GEMM_ROW(7)
    }
#undef HG_GEMM_ROW
#define HG_GEMM_STORE(r) \
    if (kMR > 0x##r && mr > 0x##r) StoreRow<NV>(d, c##r##0, c##r##1, c##r##2, c##r##3, c + 0x##r * ldc, w, alpha, beta);
    HG_GEMM_STORE(0) HG_GEMM_STORE(1) HG_GEMM_STORE(2) HG_GEMM_STORE(3)
    HG_GEMM_STORE(4) HG_GEMM_STORE(5) HG_GEMM_STORE(6) HG_GEMM_STORE(7)
#undef HG_GEMM_STORE
}

using TileFn = void (*)(const float* const*, size_t, const float*, int, float*, size_t, int, int, float, float);

// The tile for a panel nv vectors wide (1..kNV), a in place by rows or by columns.
static TileFn PickTile(int nv, bool columns) {
    constexpr int n2 = std::min(2, kNV), n3 = std::min(3, kNV);
    if (nv == 1) return columns ? Tile<1, true> : Tile<1, false>;
    if (nv == 2) return columns ? Tile<n2, true> : Tile<n2, false>;
    if (nv == 3) return columns ? Tile<n3, true> : Tile<n3, false>;
    return columns ? Tile<kNV, true> : Tile<kNV, false>;
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
    const int L = int(hn::Lanes(d)), nr = kNV * L;
    const int nc = std::max(nr, NC / nr * nr);
    const int kc_max = std::max(16, std::min(KC, 8192 / nr));  // a panel of b: 32 KB, half of L1 or less
    float* bpack = thread_buffer<PackedBlockOfB>(size_t(KC) * std::max(NC, kNV * int(HWY_MAX_BYTES / sizeof(float))));
    HWY_ALIGN float apack[size_t(kMR) * KC];  // a transposed: the tail tile's rows
    const size_t b_rs = tb ? 1 : size_t(ldb), b_cs = tb ? size_t(ldb) : 1;
    for (int jc = 0; jc < N; jc += nc) {
        const int n = std::min(nc, N - jc);
        for (int pc = 0; pc < K; pc += kc_max) {
            const int kc = std::min(kc_max, K - pc);
            const float beta_k = pc == 0 ? beta : 1.0f;
            PackB(bpack, View{b + pc * b_rs + jc * b_cs, b_rs, b_cs}, n, kc, nr, L);
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
                        PickTile(PanelWidth(n - jr, nr, L) / L, ta)(arow, ks, bp, kc, cp, size_t(ldc), mr, w, alpha,
                                                                     beta_k);
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
