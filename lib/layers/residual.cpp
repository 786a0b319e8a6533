// residual.cpp — the fast float residual add: lib/kernels/vec (Highway), long arrays split across
// threads in fixed chunks (lib/core/parallel.h). Each element is one IEEE add, so the result is bit-identical
// to the scalar twins in residual.h whatever the target or thread count.
#include "lib/layers/residual.h"

#include "lib/core/parallel.h"
#include "lib/kernels/vec.h"

namespace hg {

constexpr size_t kChunk = 8192;  // numbers per piece of parallel work

void residual_forward(float* out,         // (n)
                      const float* inp1,  // (n)
                      const float* inp2,  // (n)
                      size_t n) {
    residual_check_n("residual_forward", n);
    for_pieces(n, kChunk, 1, [&](size_t i0, size_t len) { vec_add(out + i0, inp1 + i0, inp2 + i0, len); });
}

}  // namespace hg
