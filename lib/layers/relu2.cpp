// relu2.cpp — the fast float ReLU²: Highway kernels (lib/kernels/activation_kernels), long arrays
// split across threads in fixed chunks (lib/core/parallel.h). Each element is a max and one or two
// exact-order products, so the result is bit-identical to the float twins in relu2.h on every
// target.
#include "lib/layers/relu2.h"

#include "lib/core/parallel.h"
#include "lib/kernels/activation_kernels.h"

namespace hg {

constexpr size_t kChunk = 8192;  // numbers per piece of parallel work (a multiple of every vector width)

void relu2_forward(float* out,        // (n)
                   const float* inp,  // (n)
                   size_t n) {
    relu2_check_n("relu2_forward", n);
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { relu2_forward_kernel(out + i0, inp + i0, len); });
}

// dinp = 2·max(x, 0) ⊙ dout   (line R of relu2.h)
void relu2_backward(float* dinp,        // (n)
                    const float* inp,   // (n)
                    const float* dout,  // (n)
                    size_t n) {
    relu2_check_n("relu2_backward", n);
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) {
        relu2_backward_kernel(dinp + i0, inp + i0, dout + i0, len);
    });
}

}  // namespace hg
