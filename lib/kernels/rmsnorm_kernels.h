// rmsnorm_kernels.h — Highway kernels for RMSNorm and QK-norm (dynamic dispatch; see simd.h).
// The scalar twins are rmsnorm_forward_twin / rmsnorm_backward_twin in
// lib/layers/rmsnorm.h and qknorm_*_twin in lib/layers/qknorm.h; the layers' .cpp files
// split the work over threads. The parameter gradient is layernorm_backward_params with
// mean = null (lib/kernels/layernorm_kernels.h).
#pragma once
#include <cstddef>

namespace hg {

// `rows` consecutive rows of C numbers: rstd_r = 1/sqrt(mean(x_r²) + eps) and
// out_r = x_r · rstd_r · weight (weight null: no gain). out may alias inp.
void rmsnorm_forward_rows(float* out,           // (rows, C)
                          float* rstd,          // (rows)
                          const float* inp,     // (rows, C)
                          const float* weight,  // (C) or null
                          float eps, size_t rows, size_t C);

// The input gradient of `rows` rows, added: dinp += rstd·(g - x̂·mean(g⊙x̂)), with
// g = dout⊙weight (dout when weight is null) and x̂ = inp·rstd.
void rmsnorm_backward_rows(float* dinp,          // (rows, C)
                           const float* dout,    // (rows, C)
                           const float* inp,     // (rows, C)
                           const float* weight,  // (C) or null
                           const float* rstd,    // (rows)
                           size_t rows, size_t C);

// The same for the gain-less form from its output y = x̂, written: dinp = rstd·(dout -
// y·mean(dout⊙y)). dinp may alias dout (QK-norm runs it in place on dqkv).
void rmsnorm_backward_from_output_rows(float* dinp,        // (rows, C)
                                       const float* dout,  // (rows, C)
                                       const float* out,   // (rows, C)
                                       const float* rstd,  // (rows)
                                       size_t rows, size_t C);

}  // namespace hg
