// gpt_choices.h — the architectural choices of GPTConfig that pick a layer, each as one call:
// the passes (gpt_passes.cpp) and the cached generation path (infer.cpp) name the step, these
// pick the layer. Templates over the number type, like the passes: float reaches the fast
// path, double the scalar twin (lib/layers/layers.h).
#pragma once
#include <cstddef>

#include "lib/layers/layers.h"
#include "lib/model/config.h"

namespace hg {
namespace choice {
using namespace twin;

// out = norm(inp): LayerNorm (keeps mean and rstd) or RMSNorm (keeps rstd; mean and bias are
// null, and RMSNorm subtracts no mean).
template <typename real>
void norm_forward(const GPTConfig& c, real* out, real* mean, real* rstd, const real* inp,
                  const real* weight, const real* bias, int N, int C) {
    if (c.norm == NormKind::RMSNorm)
        rmsnorm_forward(out, rstd, inp, weight, N, C);
    else
        layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

// dinp += the gradient through the norm (both add: the residual's backward, layers.h).
template <typename real>
void norm_backward(const GPTConfig& c, real* dinp, real* dweight, real* dbias, const real* dout,
                   const real* inp, const real* weight, const real* mean, const real* rstd, int N,
                   int C) {
    if (c.norm == NormKind::RMSNorm)
        rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
    else
        layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

// The MLP's activation, (N, F) -> (N, M): GELU or ReLU² elementwise (F = M = 4C), or SwiGLU on
// each row's [gate | up] (F = 2H, M = H).
template <typename real>
void mlp_activation_forward(const GPTConfig& c, real* out, const real* inp, size_t N) {
    const size_t M = c.mlp_hidden();
    switch (c.mlp) {
        case MlpKind::Gelu: gelu_forward(out, inp, N * M, c.gelu); break;
        case MlpKind::ReLU2: relu2_forward(out, inp, N * M); break;
        case MlpKind::SwiGLU: swiglu_forward(out, inp, int(N), int(M)); break;
    }
}

// dinp (N, F) = the gradient before the activation, written.
template <typename real>
void mlp_activation_backward(const GPTConfig& c, real* dinp, const real* inp, const real* dout, size_t N) {
    const size_t M = c.mlp_hidden();
    switch (c.mlp) {
        case MlpKind::Gelu: gelu_backward(dinp, inp, dout, N * M, c.gelu); break;
        case MlpKind::ReLU2: relu2_backward(dinp, inp, dout, N * M); break;
        case MlpKind::SwiGLU: swiglu_backward(dinp, inp, dout, int(N), int(M)); break;
    }
}

}  // namespace choice
}  // namespace hg
