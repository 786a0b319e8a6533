// swiglu.cpp — the fast float SwiGLU gate: the Highway kernels (lib/kernels/activation_kernels)
// on each row's two halves, rows split across threads (lib/core/parallel.h). The derivatives are
// derived above swiglu_backward_twin in swiglu.h; the scalar twins there are the reference.
#include "lib/layers/swiglu.h"

#include "lib/core/parallel.h"
#include "lib/kernels/activation_kernels.h"

namespace hg {

void swiglu_forward(float* out,        // (N, H)
                    const float* inp,  // (N, 2H)
                    int N, int H) {
    swiglu_check("swiglu_forward", N, H);
    for_pieces(N, 1, H, [&](size_t n, size_t) {  // one row per piece
        const float* a = inp + n * 2 * H;
        swiglu_forward_kernel(out + n * H, a, a + H, H);
    });
}

// da = dh ⊙ b ⊙ silu'(a),  db = dh ⊙ silu(a)   (lines A, B, S of swiglu.h)
void swiglu_backward(float* dinp,        // (N, 2H)
                     const float* inp,   // (N, 2H)
                     const float* dout,  // (N, H)
                     int N, int H) {
    swiglu_check("swiglu_backward", N, H);
    for_pieces(N, 1, H, [&](size_t n, size_t) {  // one row per piece
        const float* a = inp + n * 2 * H;
        float* da = dinp + n * 2 * H;
        swiglu_backward_kernel(da, da + H, a, a + H, dout + n * H, H);
    });
}

}  // namespace hg
