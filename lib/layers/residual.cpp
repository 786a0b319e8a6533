// residual.cpp — the fast float residual add: lib/kernels/vec (Highway), long arrays split across
// OpenMP threads in fixed chunks. Each element is one IEEE add, so the result is bit-identical
// to the scalar twins in residual.h whatever the target or thread count.
#include "lib/layers/residual.h"

#include <algorithm>

#include "lib/kernels/vec.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;
constexpr size_t kChunk = 8192;  // numbers per task

void residual_forward(float* out,         // (n)
                      const float* inp1,  // (n)
                      const float* inp2,  // (n)
                      size_t n) {
    residual_check_n("residual_forward", n);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        vec_add(out + i0, inp1 + i0, inp2 + i0, std::min(kChunk, n - i0));
    }
}

// Backward (see residual_backward_scalar): out = inp1 + inp2 passes dout unchanged to both:
//   dinp1 += dout,  dinp2 += dout     (one vec_acc each)
// dinp1 and dinp2 may be the same buffer (out = x + x): it then gets dout twice, as it should.
void residual_backward(float* dinp1,       // (n)
                       float* dinp2,       // (n)
                       const float* dout,  // (n)
                       size_t n) {
    residual_check_n("residual_backward", n);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk, len = std::min(kChunk, n - i0);
        vec_acc(dinp1 + i0, dout + i0, len);
        vec_acc(dinp2 + i0, dout + i0, len);
    }
}

}  // namespace hg
