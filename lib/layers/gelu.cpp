// gelu.cpp — the fast float GELU: Highway kernels (lib/kernels/gelu_kernels), long arrays split
// across threads in fixed chunks (lib/core/parallel.h). The derivatives are derived above
// gelu_backward_twin in gelu.h; the scalar twins there are the reference these are tested
// against.
#include "lib/layers/gelu.h"

#include "lib/core/parallel.h"
#include "lib/kernels/gelu_kernels.h"

namespace hg {

// Numbers per piece of parallel work: a multiple of every vector width, so each element is
// computed the same way (vector body or padded tail) whatever the thread count.
constexpr size_t kChunk = 8192;

void gelu_forward(float* out,        // (n)
                  const float* inp,  // (n)
                  size_t n, GeluKind kind) {
    gelu_check_n("gelu_forward", n);
    auto kernel = kind == GeluKind::Erf ? gelu_erf_forward_kernel : gelu_tanh_forward_kernel;
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { kernel(out + i0, inp + i0, len); });
}

// Backward (derivation above gelu_backward_twin in gelu.h):
//   erf form:   dinp = (Φ(x) + x·φ(x)) · dout                         gelu_erf_backward_kernel
//   tanh form:  dinp = ((1 + tanh u)/2 + x/2·(1 - tanh² u)·du/dx) · dout
//                                                                      gelu_tanh_backward_kernel
void gelu_backward(float* dinp,        // (n)
                   const float* inp,   // (n)
                   const float* dout,  // (n)
                   size_t n, GeluKind kind) {
    gelu_check_n("gelu_backward", n);
    auto kernel = kind == GeluKind::Erf ? gelu_erf_backward_kernel : gelu_tanh_backward_kernel;
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { kernel(dinp + i0, inp + i0, dout + i0, len); });
}

// The bf16 variants run the kernels that round each vector as they store it (gelu_kernels.h):
// the same float bits as gelu_forward's / gelu_backward's, rounded, and no float copy written.
void gelu_forward_bf16(bf16* out16, const float* inp, size_t n, GeluKind kind) {
    gelu_check_n("gelu_forward_bf16", n);
    auto kernel = kind == GeluKind::Erf ? gelu_erf_forward_bf16_kernel : gelu_tanh_forward_bf16_kernel;
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { kernel(out16 + i0, inp + i0, len); });
}

void gelu_backward_bf16(float* dinp, bf16* dinp16, const float* inp, const float* dout, size_t n, GeluKind kind) {
    gelu_check_n("gelu_backward_bf16", n);
    check(dinp16 != nullptr, "gelu_backward_bf16: dinp16 is the output it always writes");
    auto kernel = kind == GeluKind::Erf ? gelu_erf_backward_kernel : gelu_tanh_backward_kernel;
    auto kernel16 = kind == GeluKind::Erf ? gelu_erf_backward_bf16_kernel : gelu_tanh_backward_bf16_kernel;
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) {
        if (!dinp) return kernel16(dinp16 + i0, inp + i0, dout + i0, len);
        kernel(dinp + i0, inp + i0, dout + i0, len);
        bf16_round(dinp16 + i0, dinp + i0, len);
    });
}

}  // namespace hg
