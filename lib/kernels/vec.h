// vec.h — elementwise Highway kernels on float arrays (dynamic dispatch; see simd.h).
// Each has a plain scalar twin in the layer that uses it; tests compare the two on every
// SIMD target, on lengths that exercise the scalar tail.
#pragma once
#include <cstddef>

namespace hg {

// out[i] = a[i] + b[i]   (out may alias a or b)
void vec_add(float* out, const float* a, const float* b, size_t n);
// out[i] += a[i]
void vec_acc(float* out, const float* a, size_t n);

}  // namespace hg
