// layers.h — every layer, and how the model picks its implementation by number type.
//
// The model (lib/gpt.cpp) is one template over the number type `real`:
//   float  → the fast path: sgemm + Highway kernels (declared in each layer's header);
//   double → the scalar twins (the same math as plain loops), which the whole-model
//            gradient check runs so that finite differences are exact to ~1e-10.
// The double overloads below are that choice, written once; the model calls the same name
// for both and C++ overload resolution does the rest.
//
// How every backward treats its outputs:
//   parameter gradients (dweight, dbias, dwte, ...)  are added to (+=): gradient accumulation
//       over micro-batches and a weight used twice (tied embeddings) both sum up by themselves;
//   the input's gradient (dinp, dqkv, dlogits, ...)   is written (=): each is a fresh scratch
//       buffer, so nothing has to be zeroed before the layer runs;
//   except LayerNorm's dinp (and residual_backward),   added to: a block's input feeds both
//       the LayerNorm and the skip path, and that add is the residual connection's backward.
// llm.c adds everywhere and zeroes every activation gradient first; writing instead saves that
// pass over memory (about 5 % of a training step on the small recipes, measured with bench).
#pragma once
#include "lib/layers/attention.h"
#include "lib/layers/crossentropy.h"
#include "lib/layers/dropout.h"
#include "lib/layers/encoder.h"
#include "lib/layers/gelu.h"
#include "lib/layers/layernorm.h"
#include "lib/layers/linear.h"
#include "lib/layers/residual.h"

namespace hg {

inline void encoder_forward(double* out, const int* idx, const double* wte, const double* wpe,
                            int B, int T, int C, int V) {
    encoder_forward_scalar(out, idx, wte, wpe, B, T, C, V);
}
inline void encoder_backward(double* dwte, double* dwpe, const double* dout, const int* idx,
                             int B, int T, int C) {
    encoder_backward_scalar(dwte, dwpe, dout, idx, B, T, C);
}
inline void layernorm_forward(double* out, double* mean, double* rstd, const double* inp,
                              const double* weight, const double* bias, int N, int C) {
    layernorm_forward_scalar(out, mean, rstd, inp, weight, bias, N, C);
}
inline void layernorm_backward(double* dinp, double* dweight, double* dbias, const double* dout,
                               const double* inp, const double* weight, const double* mean,
                               const double* rstd, int N, int C) {
    layernorm_backward_scalar(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
inline void linear_forward(double* out, const double* inp, const double* weight,
                           const double* bias, int N, int C, int OC) {
    linear_forward_scalar(out, inp, weight, bias, N, C, OC);
}
inline void linear_backward(double* dinp, double* dweight, double* dbias, const double* dout,
                            const double* inp, const double* weight, int N, int C, int OC) {
    linear_backward_scalar(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
inline void attention_forward(double* out, double* att, double* /*scratch*/, const double* qkv, int B, int T, int C,
                              int NH, Dropout drop) {
    attention_forward_scalar(out, att, qkv, B, T, C, NH, drop);
}
inline void attention_backward(double* dqkv, double* scratch, const double* dout,
                               const double* qkv, const double* att, int B, int T, int C, int NH,
                               Dropout drop) {
    attention_backward_scalar(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
}
inline void gelu_forward(double* out, const double* inp, size_t n, GeluKind kind) {
    gelu_forward_scalar(out, inp, n, kind);
}
inline void gelu_backward(double* dinp, const double* inp, const double* dout, size_t n,
                          GeluKind kind) {
    gelu_backward_scalar(dinp, inp, dout, n, kind);
}
inline void residual_forward(double* out, const double* inp1, const double* inp2, size_t n) {
    residual_forward_scalar(out, inp1, inp2, n);
}
inline void residual_backward(double* dinp1, double* dinp2, const double* dout, size_t n) {
    residual_backward_scalar(dinp1, dinp2, dout, n);
}
inline void dropout_forward(double* out, const double* inp, size_t n, Dropout drop) {
    dropout_forward_scalar(out, inp, n, drop);
}
inline void dropout_backward(double* dinp, const double* dout, size_t n, Dropout drop) {
    dropout_backward_scalar(dinp, dout, n, drop);
}
inline double crossentropy_forward(double* probs, double* losses, const double* logits,
                                   const int* targets, int N, int V) {
    return crossentropy_forward_scalar(probs, losses, logits, targets, N, V);
}
inline void crossentropy_backward(double* dlogits, const double* probs, const int* targets,
                                  int N, int V, double dloss) {
    crossentropy_backward_scalar(dlogits, probs, targets, N, V, dloss);
}

}  // namespace hg
