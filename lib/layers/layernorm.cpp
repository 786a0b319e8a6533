// layernorm.cpp — the fast float LayerNorm: Highway row kernels (lib/kernels/layernorm_kernels),
// rows split across threads (lib/core/parallel.h). The math, derived, is above layernorm_backward_twin in
// layernorm.h; the scalar twins there are the reference these are tested against.
#include "lib/layers/layernorm.h"


#include "lib/core/errors.h"
#include "lib/core/parallel.h"
#include "lib/core/thread_buffer.h"
#include "lib/kernels/layernorm_kernels.h"

namespace hg {

// The parameter gradients are split into blocks of this many columns (a multiple of every
// vector width, 4 to 16 floats), fixed so the sums do not depend on the thread count.
constexpr int kColumnBlock = 64;

void layernorm_forward(float* out,           // (N, C)
                       float* mean,          // (N)
                       float* rstd,          // (N)
                       const float* inp,     // (N, C)
                       const float* weight,  // (C)
                       const float* bias,    // (C) or null
                       int N, int C) {
    check(N > 0 && C > 0, "layernorm_forward: sizes must be positive (N = {}, C = {})", N, C);
    for_pieces(N, 1, C, [&](size_t n, size_t) {  // one row per piece
        const size_t off = n * C;
        layernorm_forward_row(out + off, mean + n, rstd + n, inp + off, weight, bias, kLayerNormEps, C);
    });
}

struct FloatRow;  // names this thread's buffer for one row in float before its rounding (thread_buffer.h)

void layernorm_forward_bf16(bf16* out16, float* mean, float* rstd, const float* inp, const float* weight,
                            const float* bias, int N, int C) {
    check(N > 0 && C > 0, "layernorm_forward_bf16: sizes must be positive (N = {}, C = {})", N, C);
    for_pieces(N, 1, C, [&](size_t n, size_t) {
        float* row = thread_buffer<FloatRow>(size_t(C));
        const size_t off = n * C;
        layernorm_forward_row(row, mean + n, rstd + n, inp + off, weight, bias, kLayerNormEps, C);
        bf16_round(out16 + off, row, C);
    });
}

// Backward (derivation above layernorm_backward_twin in layernorm.h). With x̂ = (x-mean)·rstd
// and g = dout ⊙ weight, per row:
//   dinp  += rstd · (g - mean(g) - x̂ · mean(g ⊙ x̂))    layernorm_backward_row  (line X; its
//                                                        two row sums are line S)
// and over all rows:
//   dweight += Σ_rows dout ⊙ x̂,  dbias += Σ_rows dout  layernorm_backward_params (lines W, B)
// The input gradient is parallel over rows. The parameter gradients are sums over rows, so
// rows cannot be split across threads without cross-thread sums (whose order would depend on
// the thread count); they are parallel over fixed column blocks instead, each block summing
// its columns over all rows in row order.
void layernorm_backward(float* dinp,          // (N, C)
                        float* dweight,       // (C)
                        float* dbias,         // (C) or null
                        const float* dout,    // (N, C)
                        const float* inp,     // (N, C)
                        const float* weight,  // (C)
                        const float* mean,    // (N)
                        const float* rstd,    // (N)
                        int N, int C) {
    check(N > 0 && C > 0, "layernorm_backward: sizes must be positive (N = {}, C = {})", N, C);
    for_pieces(N, 1, C, [&](size_t n, size_t) {  // one row per piece
        const size_t off = n * C;
        layernorm_backward_row(dinp + off, dout + off, inp + off, weight, mean[n], rstd[n], C);
    });
    for_pieces(C, kColumnBlock, N, [&](size_t c0, size_t width) {  // columns [c0, c0 + width), all rows
        layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd, N, C, int(c0), int(c0 + width));
    });
}

}  // namespace hg
