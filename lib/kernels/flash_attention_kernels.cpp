// flash_attention_kernels.cpp — Highway implementations of flash_attention_kernels.h, compiled for
// every target by foreach_target.h. The header maps the steps here to the derivation's F1–F4, B0–B4.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "lib/kernels/flash_attention_kernels.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "lib/core/tensor.h"
#include "lib/kernels/bf16-inl.h"
#include "lib/kernels/flash_attention_kernels.h"
#include "lib/kernels/flash_space.h"
#include "lib/kernels/flash_tile_products-inl.h"
#include "lib/kernels/flash_tile_rows-inl.h"
#include "lib/kernels/simd.h"  // cpu_has_bf16_dot

HWY_BEFORE_NAMESPACE();
namespace hg::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace hg::flash_space;

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
        if (out) PrefetchRows(out + size_t(t0) * ldo, ldo, rows, hs);  // written at the block's end
        if (out16) PrefetchRows(out16 + size_t(t0) * ldo, ldo, rows, hs);
        if constexpr (kPairs) {
            LayRowsInPairs(sp.q16, nullptr, hd.q, hd.ld, t0, t1, T, hs);
            LayRowsInPairs(nullptr, sp.v2, hd.v, hd.ld, t0, t1, T, hs);
        } else {
            if (copy_q) LayRows(sp.qp, hd.q, hd.ld, t0, t1, T, hs, kRound);
            if (copy_v) LayRows(sp.vp, hd.v, hd.ld, t0, t1, T, hs, kRound);
        }
        LayTile(kt + size_t(t0) * k_hs, hd.k, hd.ld, t0, t1, hs, kRound);  // kᵀ's tile t0 / kTile
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
                // P̃ stored as the product reads it: in bf16 rounded, after ℓ summed its float values (the
                // scores, m, ℓ and o stay float: lib/layers/flash_attention.h says why)
                bf16* p16 = reinterpret_cast<bf16*>(sp.p16) + size_t(i) * kTile;
                const auto put = [&](int j, V p) HWY_ATTR {
                    if constexpr (kPairs)
                        StoreBf16Operand(p, p16 + j);
                    else
                        hn::StoreU(MaybeRounded(p, kRound), D(), s_i + j);
                };
                sp.l[i] = c * sp.l[i] + ExpDropRow(s_i, n, kTile, scale, m_new, hd.drop,
                                                   hd.drop_base + size_t(t) * T + s0, put);
                sp.m[i] = m_new;
                if (s0 > 0 && c != 1.0f) ScaleRow(sp.o + size_t(i) * hsp, hsp, c);  // else o·c = o: zero, or c = 1
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
        WriteRows(out ? out + size_t(t0) * ldo : nullptr, out16 ? out16 + size_t(t0) * ldo : nullptr, ldo, sp.o,
                  size_t(hsp), rows, hs);
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
    const bf16* out16 = hd.out16;
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
        for (float* d : {g.dk, g.dv, g.dq})
            if (d) PrefetchRows(d + size_t(s0) * g.ld, g.ld, keys, hs);
        LayTile(kt, hd.k, hd.ld, s0, s1, hs, kRound);
        LayTile(vt, hd.v, hd.ld, s0, s1, hs, kRound);
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
                for (int t = t0; t < t1; t++)  // from the rounded out where the bf16 layer kept only it
                    sp.D[t] = out ? DotRow(dout + size_t(t) * ldo, out + size_t(t) * ldo, hs)
                                : DotRow(dout + size_t(t) * ldo, out16 + size_t(t) * ldo, hs);
            }
            // the scores again (F1's product, the same floats), and B1's dP = dout · vᵀ
            Product<Step>(sp.p, kTile, qa.at(t0), qa.ld, 1, kt, kTile, rows, kTile, k_hs, Causal::Cols, off, false);
            Product<Step>(sp.dp, kTile, da.at(t0), da.ld, 1, vt, kTile, rows, kTile, k_hs, Causal::Cols, off, false);
            // B1–B3 two rows at a time, P̃ and dS stored as the products read them: in bf16 rounded, after
            // dS was formed from the float A, dA and D (P itself is not kept). Float: P̃ in pd, dS over dP.
            for (int i = 0; i < rows; i += 2) {
                const auto in = [&](int r) {
                    const int t = t0 + r, n = std::min(s1, t + 1) - s0;
                    return GradRowIn{sp.p + size_t(r) * kTile, sp.dp + size_t(r) * kTile, n, lse[t], sp.D[t],
                                     KeepLanes(hd.drop, hd.drop_base + size_t(t) * T + s0)};
                };
                const bool has_b = i + 1 < rows;
                const GradRowIn a = in(i), b = has_b ? in(i + 1) : GradRowIn{a.s, a.dp, 0, 0.0f, 0.0f, a.keep};
                const auto put = [&](int j, V pa, V sa, V pb, V sb) HWY_ATTR {
                    const D d;
                    if constexpr (kPairs) {
                        uint32_t *pd2 = sp.pd2 + size_t(i / 2) * kTile, *ds2 = sp.ds2 + size_t(i / 2) * kTile;
                        bf16* ds16 = reinterpret_cast<bf16*>(sp.ds16) + size_t(i) * kTile;
                        hn::StoreU(PairBf16Operands(pa, pb), DU(), pd2 + j);
                        hn::StoreU(PairBf16Operands(sa, sb), DU(), ds2 + j);
                        StoreBf16Operand(sa, ds16 + j);
                        if (has_b) StoreBf16Operand(sb, ds16 + kTile + j);
                    } else {
                        float *pd = sp.pd + size_t(i) * kTile, *ds = sp.dp + size_t(i) * kTile;
                        hn::StoreU(MaybeRounded(pa, kRound), d, pd + j);
                        hn::StoreU(MaybeRounded(sa, kRound), d, ds + j);
                        if (has_b) {
                            hn::StoreU(MaybeRounded(pb, kRound), d, pd + kTile + j);
                            hn::StoreU(MaybeRounded(sb, kRound), d, ds + kTile + j);
                        }
                    }
                };
                GradRowPair(a, b, kTile, scale, hd.drop, put);
            }
            // B1: dv[s0:s1] += P̃ᵀ · dout[t0:t1];  B4: dk[s0:s1] += dSᵀ · q[t0:t1],  dq[t0:t1] += dS · k[s0:s1]
            const int k_rows = (rows + kPer - 1) / kPer;
            if constexpr (kPairs) {
                Product<Step>(sp.dv, size_t(hsp), sp.pd2, 1, kTile, dob.at(t0 / 2), dob.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dk, size_t(hsp), sp.ds2, 1, kTile, qb.at(t0 / 2), qb.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dq + size_t(t0) * hsp, size_t(hsp), sp.ds16, kTile / 2, 1, kb.at(s0 / 2), kb.ld, rows,
                              hsp, (keys + 1) / 2, Causal::KEnd, off, true);
            } else {
                Product<Step>(sp.dv, size_t(hsp), sp.pd, 1, kTile, dob.at(t0), dob.ld, keys, hsp, k_rows, Causal::KBegin,
                              off, true);
                Product<Step>(sp.dk, size_t(hsp), sp.dp, 1, kTile, qb.at(t0), qb.ld, keys, hsp, k_rows,
                              Causal::KBegin, off, true);
                Product<Step>(sp.dq + size_t(t0) * hsp, size_t(hsp), sp.dp, kTile, 1, kb.at(s0), kb.ld, rows, hsp, keys,
                              Causal::KEnd, off, true);
            }
        }
        const auto at = [&](auto* p) { return p ? p + size_t(s0) * g.ld : nullptr; };
        WriteRows(at(g.dk), at(g.dk16), g.ld, sp.dk, size_t(hsp), keys, hs);
        WriteRows(at(g.dv), at(g.dv16), g.ld, sp.dv, size_t(hsp), keys, hs);
        WriteRows(at(g.dq), at(g.dq16), g.ld, sp.dq + size_t(s0) * hsp, size_t(hsp), keys, hs);
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

float FlashExpRow(float* p, const float* x, int n, int width, float scale, float shift) {
    const auto put = [&](int j, V e) HWY_ATTR { hn::StoreU(e, D(), p + j); };
    return ExpDropRow(x, n, width, scale, shift, Dropout{}, 0, put);
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
HWY_EXPORT(FlashExpRow);

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

float flash_exp_row(float* p, const float* x, int n, int width, float scale, float shift) {
    return HWY_DYNAMIC_DISPATCH(FlashExpRow)(p, x, n, width, scale, shift);
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
