// rope.cpp — the fast float rotary embeddings: per position, the 2·NH heads of q and k through
// the Highway rotation kernel (lib/kernels/rope_kernels) with that position's row of the
// table; positions split across OpenMP threads. The math is above rope_backward_scalar in
// rope.h; the result is bit-identical to the float twin there.
#include "lib/layers/rope.h"

#include "lib/kernels/rope_kernels.h"

namespace hg {

// Below this many numbers a parallel region costs more than it saves.
constexpr size_t kParallelMin = 32768;

using RotateKernel = void (*)(float*, const float*, const float*, size_t, size_t);

static void rope_apply(RotateKernel kernel, float* qkv, const float* cos, const float* sin,
                       int B, int T, int C, int NH) {
    const int N = B * T;
    const size_t h = (size_t)C / NH / 2;
#pragma omp parallel for schedule(static) if ((size_t)N * 2 * C > kParallelMin)
    for (int bt = 0; bt < N; bt++) {
        const size_t t = (size_t)(bt % T);
        kernel(qkv + (size_t)bt * 3 * C, cos + t * h, sin + t * h, 2 * (size_t)NH, h);
    }
}

void rope_forward(float* qkv,         // (B, T, 3C)
                  const float* cos,   // (>= T, hs/2)
                  const float* sin,   // (>= T, hs/2)
                  int B, int T, int C, int NH) {
    rope_check_sizes("rope_forward", B, T, C, NH);
    rope_apply(rope_rotate_kernel, qkv, cos, sin, B, T, C, NH);
}

// dx = Rᵀ dy per pair: the rotation by -θ (derivation above rope_backward_scalar in rope.h)
void rope_backward(float* dqkv,        // (B, T, 3C)
                   const float* cos,   // (>= T, hs/2)
                   const float* sin,   // (>= T, hs/2)
                   int B, int T, int C, int NH) {
    rope_check_sizes("rope_backward", B, T, C, NH);
    rope_apply(rope_unrotate_kernel, dqkv, cos, sin, B, T, C, NH);
}

}  // namespace hg
