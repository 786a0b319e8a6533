// layernorm_kernels.h — Highway kernels for LayerNorm (dynamic dispatch; see simd.h).
// The scalar twins are layernorm_forward_twin / layernorm_backward_twin in
// lib/layers/layernorm.h; lib/layers/layernorm.cpp splits the work over threads.
#pragma once
#include <cstddef>

namespace hg {

// One row: mean, rstd, and out_c = (x_c - mean)·rstd·weight_c + bias_c (bias may be null).
void layernorm_forward_row(float* out,           // (C)
                           float* mean,          // (1)
                           float* rstd,          // (1)
                           const float* inp,     // (C)
                           const float* weight,  // (C)
                           const float* bias,    // (C) or null
                           float eps, size_t C);

// One row of the input gradient: dinp_c += rstd·(g_c - mean(g) - x̂_c·mean(g⊙x̂)), g = dout⊙weight.
void layernorm_backward_row(float* dinp,          // (C)
                            const float* dout,    // (C)
                            const float* inp,     // (C)
                            const float* weight,  // (C)
                            float mean, float rstd, size_t C);

// Columns [c0, c1) of the parameter gradients, summed over all N rows in row order:
//   dweight_c += Σ_n dout[n,c]·x̂[n,c],   dbias_c += Σ_n dout[n,c]   (dbias may be null).
// mean null means 0 (x̂ = x·rstd): RMSNorm's dweight (lib/layers/rmsnorm.cpp).
// Each column is one SIMD lane (or the scalar tail) for all n, so its sum never depends on
// how a caller splits columns across threads, as long as the split is fixed.
void layernorm_backward_params(float* dweight,      // (C)
                               float* dbias,        // (C) or null
                               const float* dout,   // (N, C)
                               const float* inp,    // (N, C)
                               const float* mean,   // (N) or null
                               const float* rstd,   // (N)
                               size_t N, size_t C, size_t c0, size_t c1);

}  // namespace hg
