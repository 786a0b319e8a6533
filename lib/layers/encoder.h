// encoder.h — token + position embeddings: the first layer of the GPT.
//
//   out[b,t,:] = wte[idx[b,t], :] + wpe[t, :]
//
// wpe is either the learned (block_size, C) parameter or the fixed sinusoidal table
// (no parameters; its gradient is not wanted, so the backward gets dwpe = nullptr).
#pragma once
#include <cstddef>

namespace hg {

// out (B,T,C); idx (B,T) token ids, each checked to be in [0, V) (hg::Error otherwise);
// wte (V,C); wpe (>= T, C).
void encoder_forward(float* out, const int* idx, const float* wte, const float* wpe,
                     int B, int T, int C, int V);
// dwte (V,C) += scatter of dout rows (repeated tokens accumulate); dwpe (T,C) += sum over b,
// skipped when dwpe is null.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* idx,
                      int B, int T, int C);

template <typename real>
void encoder_forward_scalar(real* out, const int* idx, const real* wte, const real* wpe,
                            int B, int T, int C, int V);
template <typename real>
void encoder_backward_scalar(real* dwte, real* dwpe, const real* dout, const int* idx,
                             int B, int T, int C);

// The fixed sinusoidal table (Vaswani et al. 2017), table (maxT, C):
//   table[t, 2i] = sin(t / 10000^(2i/C)),  table[t, 2i+1] = cos(t / 10000^(2i/C)).
template <typename real>
void sinusoidal_table(real* table, int maxT, int C);

}  // namespace hg
