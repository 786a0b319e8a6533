// swiglu.cpp — the fast float SwiGLU gate: the Highway kernels (lib/kernels/activation_kernels)
// on each row's two halves, rows split across OpenMP threads. The derivatives are derived above
// swiglu_backward_scalar in swiglu.h; the scalar twins there are the reference.
#include "lib/layers/swiglu.h"

#include "lib/kernels/activation_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;

void swiglu_forward(float* out,        // (N, H)
                    const float* inp,  // (N, 2H)
                    int N, int H) {
    swiglu_check("swiglu_forward", N, H);
    // Each row is done whole by one thread: results do not depend on the thread count.
#pragma omp parallel for schedule(static) if ((size_t)N * H > kParallelMin)
    for (int n = 0; n < N; n++) {
        const float* a = inp + (size_t)n * 2 * H;
        swiglu_forward_kernel(out + (size_t)n * H, a, a + H, H);
    }
}

// da = dh ⊙ b ⊙ silu'(a),  db = dh ⊙ silu(a)   (lines A, B, S of swiglu.h)
void swiglu_backward(float* dinp,        // (N, 2H)
                     const float* inp,   // (N, 2H)
                     const float* dout,  // (N, H)
                     int N, int H) {
    swiglu_check("swiglu_backward", N, H);
#pragma omp parallel for schedule(static) if ((size_t)N * H > kParallelMin)
    for (int n = 0; n < N; n++) {
        const float* a = inp + (size_t)n * 2 * H;
        float* da = dinp + (size_t)n * 2 * H;
        swiglu_backward_kernel(da, da + H, a, a + H, dout + (size_t)n * H, H);
    }
}

}  // namespace hg
