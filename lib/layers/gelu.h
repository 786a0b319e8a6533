// gelu.h — GELU, in both forms:
//   erf  (exact; PyTorch's default, nanoGPT, the course):  x · Φ(x) = x/2 · (1 + erf(x/√2))
//   tanh (GPT-2, llm.c):  x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
#pragma once
#include <cstddef>

namespace hg {

enum class GeluKind { Erf, Tanh };

void gelu_forward(float* out, const float* inp, size_t n, GeluKind kind);
// dinp += gelu'(inp) ⊙ dout
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind);

template <typename real>
void gelu_forward_scalar(real* out, const real* inp, size_t n, GeluKind kind);
template <typename real>
void gelu_backward_scalar(real* dinp, const real* inp, const real* dout, size_t n, GeluKind kind);

}  // namespace hg
