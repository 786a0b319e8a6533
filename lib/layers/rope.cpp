// rope.cpp — the fast float rotary embeddings: per position, the 2·NH heads of q and k through
// the Highway rotation kernel (lib/kernels/rope_kernels) with that position's row of the
// table; positions split across threads (lib/core/parallel.h). The math is above
// rope_backward_twin in rope.h; the result is bit-identical to the float twin there.
#include "lib/layers/rope.h"

#include "lib/core/parallel.h"
#include "lib/kernels/rope_kernels.h"

namespace hg {

using RotateKernel = void (*)(float*, const float*, const float*, size_t, size_t);

static void rope_apply(RotateKernel kernel, float* qkv, const float* cos, const float* sin,
                       int B, int T, int C, int NH) {
    const size_t h = (size_t)C / NH / 2;
    for_pieces(size_t(B) * T, 1, 2 * size_t(C), [&](size_t bt, size_t) {  // one position per piece
        const size_t t = bt % T;
        kernel(qkv + bt * 3 * C, cos + t * h, sin + t * h, 2 * (size_t)NH, h);
    });
}

void rope_forward(float* qkv,         // (B, T, 3C)
                  const float* cos,   // (>= T, hs/2)
                  const float* sin,   // (>= T, hs/2)
                  int B, int T, int C, int NH) {
    rope_check_sizes("rope_forward", B, T, C, NH);
    rope_apply(rope_rotate_kernel, qkv, cos, sin, B, T, C, NH);
}

// dx = Rᵀ dy per pair: the rotation by -θ (derivation above rope_backward_twin in rope.h)
void rope_backward(float* dqkv,        // (B, T, 3C)
                   const float* cos,   // (>= T, hs/2)
                   const float* sin,   // (>= T, hs/2)
                   int B, int T, int C, int NH) {
    rope_check_sizes("rope_backward", B, T, C, NH);
    rope_apply(rope_unrotate_kernel, dqkv, cos, sin, B, T, C, NH);
}

}  // namespace hg
