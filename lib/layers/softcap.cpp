// softcap.cpp — the fast float logit soft-cap: Highway kernels (lib/kernels/activation_kernels),
// long arrays split across threads in fixed chunks (lib/core/parallel.h). The derivative is derived
// above softcap_backward_twin in softcap.h; the scalar twins there are the reference.
#include "lib/layers/softcap.h"

#include "lib/core/parallel.h"
#include "lib/kernels/activation_kernels.h"

namespace hg {

constexpr size_t kChunk = 8192;  // numbers per piece of parallel work (a multiple of every vector width)

void softcap_forward(float* out,        // (n)
                     const float* inp,  // (n)
                     size_t n, float cap) {
    softcap_check("softcap_forward", n, cap);
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { softcap_forward_kernel(out + i0, inp + i0, len, cap); });
}

// dz = (1 - (y/S)²) ⊙ dy   (line C of softcap.h)
void softcap_backward(float* dinp,        // (n)
                      const float* out,   // (n)
                      const float* dout,  // (n)
                      size_t n, float cap) {
    softcap_check("softcap_backward", n, cap);
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) {
        softcap_backward_kernel(dinp + i0, out + i0, dout + i0, len, cap);
    });
}

}  // namespace hg
