// rope_kernels.h — Highway kernels for rotary position embeddings (dynamic dispatch; see
// simd.h). The scalar twins are rope_forward_twin / rope_backward_twin in
// lib/layers/rope.h; lib/layers/rope.cpp splits the positions over threads.
//
// Plain multiplies and adds, no fused multiply-add, in the same order as the twin: the result
// is bit-identical to the float twin on every SIMD target (the build has -ffp-contract=off, so
// the twin is not fused either).
#pragma once
#include <cstddef>

namespace hg {

// `heads` consecutive head vectors of 2·h numbers each (x), turned by one position's angles:
//   y_i = x_i·cos_i - x_{i+h}·sin_i,   y_{i+h} = x_{i+h}·cos_i + x_i·sin_i,   i < h
void rope_rotate_kernel(float* x,          // (heads, 2h), in place
                        const float* cos,  // (h)
                        const float* sin,  // (h)
                        size_t heads, size_t h);
// The inverse rotation (by -θ: sin negated), the backward.
void rope_unrotate_kernel(float* x, const float* cos, const float* sin, size_t heads, size_t h);

}  // namespace hg
