// relu2.cpp — the fast float ReLU²: Highway kernels (lib/kernels/activation_kernels), long arrays
// split across OpenMP threads in fixed chunks. Each element is a max and one or two exact-order
// products, so the result is bit-identical to the float twins in relu2.h on every target.
#include "lib/layers/relu2.h"

#include <algorithm>

#include "lib/kernels/activation_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;
constexpr size_t kChunk = 8192;  // numbers per task (a multiple of every vector width)

void relu2_forward(float* out,        // (n)
                   const float* inp,  // (n)
                   size_t n) {
    relu2_check_n("relu2_forward", n);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        relu2_forward_kernel(out + i0, inp + i0, std::min(kChunk, n - i0));
    }
}

// dinp = 2·max(x, 0) ⊙ dout   (line R of relu2.h)
void relu2_backward(float* dinp,        // (n)
                    const float* inp,   // (n)
                    const float* dout,  // (n)
                    size_t n) {
    relu2_check_n("relu2_backward", n);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        relu2_backward_kernel(dinp + i0, inp + i0, dout + i0, std::min(kChunk, n - i0));
    }
}

}  // namespace hg
