// encoder.h — token + position embeddings: the first layer of the GPT.
//
//   out[b,t,:] = wte[idx[b,t], :] + wpe[t, :]
//
// wpe is either the learned (block_size, C) parameter or the fixed sinusoidal table
// (no parameters; its gradient is not wanted, so the backward gets dwpe = nullptr), or null
// with rotary positions, which enter inside attention (rope.h): then out = wte[idx], a copy.
#pragma once
#include <cmath>
#include <cstddef>

#include "lib/core/errors.h"

namespace hg {

// out (B,T,C); idx (B,T) token ids, each checked to be in [0, V) (hg::Error otherwise);
// wte (V,C); wpe (>= T, C) or null (no position term). Sizes <= 0 are hg::Error.
void encoder_forward(float* out, const int* idx, const float* wte, const float* wpe,
                     int B, int T, int C, int V);
// dwte (V,C) += scatter of dout rows (repeated tokens accumulate); dwpe (T,C) += sum over b,
// skipped when dwpe is null.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* idx,
                      int B, int T, int C);

template <typename real>
void encoder_forward_twin(real* out, const int* idx, const real* wte, const real* wpe,
                          int B, int T, int C, int V);
template <typename real>
void encoder_backward_twin(real* dwte, real* dwpe, const real* dout, const int* idx,
                           int B, int T, int C);

// The fixed sinusoidal table (Vaswani et al. 2017), table (maxT, C):
//   table[t, 2i] = sin(t / 10000^(2i/C)),  table[t, 2i+1] = cos(t / 10000^(2i/C)).
template <typename real>
void sinusoidal_table(real* table, int maxT, int C);

// ---------------------------------------------------------------------------------------------
// Scalar twins, the token check, and the sinusoidal table.

// Throws hg::Error naming the first token id outside [0, V), with its position.
inline void encoder_check_tokens(const int* idx,  // (B, T)
                                 int B, int T, int V) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const int id = idx[(size_t)b * T + t];
            check(id >= 0 && id < V,
                  "encoder_forward: token id {} at (b = {}, t = {}) is outside the vocabulary "
                  "[0, V = {})", id, b, t, V);
        }
}

inline void encoder_check_sizes(const char* fn, int B, int T, int C) {
    check(B > 0 && T > 0 && C > 0, "{}: sizes must be positive (B = {}, T = {}, C = {})", fn, B,
          T, C);
}

template <typename real>
void encoder_forward_twin(real* out,        // (B, T, C)
                          const int* idx,   // (B, T)
                          const real* wte,  // (V, C)
                          const real* wpe,  // (>= T, C) or null
                          int B, int T, int C, int V) {
    encoder_check_sizes("encoder_forward", B, T, C);
    check(V > 0, "encoder_forward: V ({}) must be positive", V);
    encoder_check_tokens(idx, B, T, V);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            real* out_bt = out + ((size_t)b * T + t) * C;
            const real* wte_ix = wte + (size_t)idx[(size_t)b * T + t] * C;
            if (!wpe) {
                for (int c = 0; c < C; c++) out_bt[c] = wte_ix[c];
                continue;
            }
            const real* wpe_t = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) out_bt[c] = wte_ix[c] + wpe_t[c];
        }
}

// Encoder backward.  out[b,t,c] = wte[idx[b,t], c] + wpe[t, c], shapes as above.
// ∂out[b,t,c]/∂wte[v,c] = [idx[b,t] == v] and ∂out[b,t,c]/∂wpe[t,c] = 1, so
//   dwte[v, :] += Σ_{(b,t): idx[b,t] = v} dout[b,t,:]     a scatter-add of dout's rows  (line V)
//   dwpe[t, :] += Σ_b dout[b,t,:]                          every batch row hits wpe[t]  (line P)
// A token that occurs k times in the batch gets k rows added into one dwte row: that is why
// the scatter must accumulate, and why the fast version keeps it serial. Rows of tokens that
// do not occur get nothing. idx was checked by the forward; the backward trusts it.
template <typename real>
void encoder_backward_twin(real* dwte,        // (V, C)
                           real* dwpe,        // (T, C) or null (a fixed table, or none)
                           const real* dout,  // (B, T, C)
                           const int* idx,    // (B, T)
                           int B, int T, int C) {
    encoder_check_sizes("encoder_backward", B, T, C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const real* dout_bt = dout + ((size_t)b * T + t) * C;
            real* dwte_ix = dwte + (size_t)idx[(size_t)b * T + t] * C;
            for (int c = 0; c < C; c++) dwte_ix[c] += dout_bt[c];  // line V
            if (dwpe) {
                real* dwpe_t = dwpe + (size_t)t * C;
                for (int c = 0; c < C; c++) dwpe_t[c] += dout_bt[c];  // line P
            }
        }
}

// Column 2i holds sin(t·ω_i), column 2i+1 cos(t·ω_i), ω_i = 10000^(-2i/C): frequencies fall
// geometrically from 1 (period 2π positions) to about 1/10000 (period ~62832 positions).
// With C odd, the last column is a sine with no cosine partner. Computed in double whatever
// `real` is, then rounded once.
template <typename real>
void sinusoidal_table(real* table,  // (maxT, C)
                      int maxT, int C) {
    check(maxT > 0 && C > 0, "sinusoidal_table: sizes must be positive (maxT = {}, C = {})", maxT,
          C);
    for (int t = 0; t < maxT; t++)
        for (int c = 0; c < C; c++) {
            const int two_i = c - c % 2;  // 2i for both columns of a pair
            const double omega = std::pow(10000.0, -double(two_i) / C);
            const double angle = t * omega;
            table[(size_t)t * C + c] = real(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
}

}  // namespace hg
