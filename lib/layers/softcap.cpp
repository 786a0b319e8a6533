// softcap.cpp — the fast float logit soft-cap: Highway kernels (lib/kernels/activation_kernels),
// long arrays split across OpenMP threads in fixed chunks. The derivative is derived above
// softcap_backward_scalar in softcap.h; the scalar twins there are the reference.
#include "lib/layers/softcap.h"

#include <algorithm>

#include "lib/kernels/activation_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;
constexpr size_t kChunk = 8192;  // numbers per task (a multiple of every vector width)

void softcap_forward(float* out,        // (n)
                     const float* inp,  // (n)
                     size_t n, float cap) {
    softcap_check("softcap_forward", n, cap);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        softcap_forward_kernel(out + i0, inp + i0, std::min(kChunk, n - i0), cap);
    }
}

// dz = (1 - (y/S)²) ⊙ dy   (line C of softcap.h)
void softcap_backward(float* dinp,        // (n)
                      const float* out,   // (n)
                      const float* dout,  // (n)
                      size_t n, float cap) {
    softcap_check("softcap_backward", n, cap);
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        softcap_backward_kernel(dinp + i0, out + i0, dout + i0, std::min(kChunk, n - i0), cap);
    }
}

}  // namespace hg
