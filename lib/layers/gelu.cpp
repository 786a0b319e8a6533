// gelu.cpp — the fast float GELU: Highway kernels (lib/kernels/gelu_kernels), long arrays split
// across OpenMP threads in fixed chunks. The derivatives are derived above gelu_backward_scalar
// in gelu.h; the scalar twins there are the reference these are tested against.
#include "lib/layers/gelu.h"

#include <algorithm>

#include "lib/kernels/gelu_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;
// Work is split into chunks of this many numbers (a multiple of every vector width), fixed so
// each element is computed the same way whatever the thread count.
constexpr size_t kChunk = 8192;

void gelu_forward(float* out,        // (n)
                  const float* inp,  // (n)
                  size_t n, GeluKind kind) {
    gelu_check_n("gelu_forward", n);
    auto kernel = kind == GeluKind::Erf ? gelu_erf_forward_kernel : gelu_tanh_forward_kernel;
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        kernel(out + i0, inp + i0, std::min(kChunk, n - i0));
    }
}

// Backward (derivation above gelu_backward_scalar in gelu.h):
//   erf form:   dinp = (Φ(x) + x·φ(x)) · dout                         gelu_erf_backward_kernel
//   tanh form:  dinp = ((1 + tanh u)/2 + x/2·(1 - tanh² u)·du/dx) · dout
//                                                                      gelu_tanh_backward_kernel
void gelu_backward(float* dinp,        // (n)
                   const float* inp,   // (n)
                   const float* dout,  // (n)
                   size_t n, GeluKind kind) {
    gelu_check_n("gelu_backward", n);
    auto kernel = kind == GeluKind::Erf ? gelu_erf_backward_kernel : gelu_tanh_backward_kernel;
    const std::ptrdiff_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (std::ptrdiff_t k = 0; k < chunks; k++) {
        const size_t i0 = k * kChunk;
        kernel(dinp + i0, inp + i0, dout + i0, std::min(kChunk, n - i0));
    }
}

}  // namespace hg
