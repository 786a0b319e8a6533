// normal_kernels.h — standard normal draws for initial weights, on SIMD (dynamic dispatch; see
// simd.h). The scalar twin is Rng::normal (lib/core/rng.h), one draw at a time.
#pragma once
#include <cstddef>

#include "lib/core/rng.h"

namespace hg {

// out[i] = float(scale · z_i), where z_i is the normal Rng::normal makes from draws 2i and 2i+1
// of `rng` (Box-Muller: √(−2 ln(1 − u₁)) · cos(2π u₂)); `rng` itself is not moved. The uniforms
// are rng's own bits; the logarithm and cosine are Highway's, in double, so a value can differ
// from the twin's std::log / std::cos in the last bit of a double, which rounding to float
// almost always hides. Each value depends only on its own two draws, never on where it sits
// in `out` or on n.
void normal_kernel(float* out, size_t n, const Rng& rng, double scale);

}  // namespace hg
