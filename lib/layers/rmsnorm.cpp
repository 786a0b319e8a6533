// rmsnorm.cpp — the fast float RMSNorm: Highway row kernels (lib/kernels/rmsnorm_kernels), rows
// split across threads (lib/core/parallel.h). The math, derived, is above rmsnorm_backward_twin in
// rmsnorm.h; the scalar twins there are the reference these are tested against.
#include "lib/layers/rmsnorm.h"

#include "lib/core/parallel.h"
#include "lib/kernels/layernorm_kernels.h"
#include "lib/kernels/rmsnorm_kernels.h"

namespace hg {

// dweight is split into blocks of this many columns (a multiple of every vector width), fixed
// so its sums do not depend on the thread count.
constexpr int kColumnBlock = 64;

void rmsnorm_forward(float* out,           // (N, C)
                     float* rstd,          // (N)
                     const float* inp,     // (N, C)
                     const float* weight,  // (C) or null
                     int N, int C) {
    rmsnorm_check("rmsnorm_forward", weight, nullptr, N, C);
    for_pieces(N, 1, C, [&](size_t n, size_t) {  // one row per piece
        const size_t off = n * C;
        rmsnorm_forward_rows(out + off, rstd + n, inp + off, weight, kRmsNormEps, 1, C);
    });
}

// Backward (derivation above rmsnorm_backward_twin in rmsnorm.h). With x̂ = x·rstd and
// g = dout ⊙ weight, per row:
//   dinp    += rstd · (g - x̂ · mean(g ⊙ x̂))   rmsnorm_backward_rows      (lines S, X)
// and over all rows:
//   dweight += Σ_rows dout ⊙ x̂                layernorm_backward_params  (line W; mean = null,
//                                                                         no dbias)
// The input gradient is parallel over rows; dweight, a sum over rows, over fixed column blocks,
// each block summing its columns over all rows in row order (as layernorm.cpp does).
void rmsnorm_backward(float* dinp,          // (N, C)
                      float* dweight,       // (C) or null
                      const float* dout,    // (N, C)
                      const float* inp,     // (N, C)
                      const float* weight,  // (C) or null
                      const float* rstd,    // (N)
                      int N, int C) {
    rmsnorm_check("rmsnorm_backward", weight, dweight, N, C);
    for_pieces(N, 1, C, [&](size_t n, size_t) {  // one row per piece
        const size_t off = n * C;
        rmsnorm_backward_rows(dinp + off, dout + off, inp + off, weight, rstd + n, 1, C);
    });
    if (!dweight) return;
    for_pieces(C, kColumnBlock, N, [&](size_t c0, size_t width) {  // columns [c0, c0 + width), all rows
        layernorm_backward_params(dweight, nullptr, dout, inp, nullptr, rstd, N, C, int(c0), int(c0 + width));
    });
}

}  // namespace hg
