// attention.h — causal multi-head self-attention, all heads in one pass.
//
// qkv (B,T,3C) is the fused projection's output: for each position, q (C) then k (C) then
// v (C), each holding NH heads of hs = C/NH contiguous numbers. For each (b, h):
//   scores = q·kᵀ / √hs            (T,T), masked so position t sees only s ≤ t
//   att    = softmax(scores)        (T,T), rows sum to 1 over s ≤ t
//   out    = dropout(att) · v       (T,hs), written into head h's slice of out (B,T,C)
// The output projection is a separate linear layer.
//
// Stored for the backward: att (B,NH,T,T), the pre-dropout probabilities (the upper
// triangle is never read). qkv itself is kept by the caller.
#pragma once
#include <cstddef>

#include "lib/layers/dropout.h"

namespace hg {

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       Dropout drop);
// dqkv (B,T,3C) +=. scratch: (B,NH,T,T) floats of working space (contents not used after).
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, Dropout drop);

template <typename real>
void attention_forward_scalar(real* out, real* att, const real* qkv, int B, int T, int C,
                              int NH, Dropout drop);
template <typename real>
void attention_backward_scalar(real* dqkv, real* scratch, const real* dout, const real* qkv,
                               const real* att, int B, int T, int C, int NH, Dropout drop);

}  // namespace hg
