// flash_space.h — how one head of the flash layer (flash_attention_kernels.cpp) lays out its working
// space: the regions of a thread's slice, the same on every SIMD target, so that
// flash_head_scratch can size a slice without knowing the target that will use it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "lib/core/tensor.h"  // Carver
#include "lib/kernels/flash_attention_kernels.h"  // kFlashTile

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
// keys. Both: s (tile, tile) the scores, then P̃ in float; o (tile, hsp) the output's sums; m and l
// (tile) the running max and sum.
struct ForwardSpace {
    float *kt, *qp, *vp, *s, *o, *m, *l;
    uint32_t *q16, *kt2, *v2, *p16;
};
inline ForwardSpace forward_space(Carve& c, int T, int hs, bool pairs) {
    const size_t Tp = PadT(T), hsp = PadHs(hs), tile = kTile;
    ForwardSpace f{};
    if (pairs) {
        f.q16 = c.pairs(Tp * hsp / 2), f.kt2 = c.pairs(hsp / 2 * Tp), f.v2 = c.pairs(Tp / 2 * hsp);
        f.p16 = c.pairs(tile * tile / 2);
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
// pairs along keys; float only: pd (tile, tile) a tile's P̃. Both: D (Tp); of a tile, p (tile, tile)
// the scores, dp (tile, tile) dP, then dS where the products read floats; dq (Tp, hsp), dk, dv (tile,
// hsp) the gradients' sums.
struct BackwardSpace {
    float *kt, *vt, *qp, *kp, *dop, *D, *p, *pd, *dp, *dq, *dk, *dv;
    uint32_t *q16, *do16, *kt2, *vt2, *q2, *k2, *do2, *pd2, *ds2, *ds16;
};
inline BackwardSpace backward_space(Carve& c, int T, int hs, bool pairs) {
    const size_t Tp = PadT(T), hsp = PadHs(hs), tile = kTile;
    BackwardSpace g{};
    if (pairs) {
        g.q16 = c.pairs(Tp * hsp / 2), g.do16 = c.pairs(Tp * hsp / 2);
        g.kt2 = c.pairs(hsp / 2 * tile), g.vt2 = c.pairs(hsp / 2 * tile);
        g.q2 = c.pairs(Tp / 2 * hsp), g.k2 = c.pairs(Tp / 2 * hsp), g.do2 = c.pairs(Tp / 2 * hsp);
        g.pd2 = c.pairs(tile / 2 * tile), g.ds2 = c.pairs(tile / 2 * tile), g.ds16 = c.pairs(tile * tile / 2);
    } else {
        g.kt = c.take(size_t(hs) * tile), g.vt = c.take(size_t(hs) * tile);
        g.qp = c.take(Tp * hsp), g.kp = c.take(Tp * hsp), g.dop = c.take(Tp * hsp), g.pd = c.take(tile * tile);
    }
    g.D = c.take(Tp), g.p = c.take(tile * tile), g.dp = c.take(tile * tile);
    g.dq = c.take(Tp * hsp), g.dk = c.take(tile * hsp), g.dv = c.take(tile * hsp);
    return g;
}
}  // namespace hg::flash_space
