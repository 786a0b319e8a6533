// infer.h — the forward pass for generation: a KV cache, and only the new positions computed.
//
// gpt_forward computes every position of its (B, T) input. Generating with it, token after
// token, recomputes the whole context for each new token: T rows through every matmul and
// T² attention scores per token. But a block's key and value at position t depend only on the
// tokens at positions ≤ t (the causal mask), so once computed they do not change while the
// context grows. The cache keeps them, per layer and per sequence, and a call computes only
// the new positions: for a new position t of sequence b, in block ℓ, head h,
//   k[ℓ,b,t], v[ℓ,b,t] = the K and V parts of c_attn(ln_1(x_t))        appended to the cache
//   out_t = Σ_{s ≤ t} softmax_s(q_t · k[ℓ,b,s] / √hs) · v[ℓ,b,s]       over the cached s ≤ t
// Everything else (the norms, the linear layers, the MLP's activation, the residual adds, and
// rotary positions and QK-norm on q and k) acts on each position alone and runs the same layer
// functions as gpt_forward, on the new rows only. Forward only:
// no backward, no dropout (generation never trains), and only the last position's logits.
//
// A cached key is only right while its position keeps its index: positions are embedded by
// absolute index (learned or sinusoidal), and rotary positions turn each key by the angle of its
// absolute index before it is cached. Past block_size the context is cropped to the last
// block_size tokens, every token moves down one position, and the cache must be refilled from
// the cropped window (lib/model/generate.h does, for every token past block_size).
#pragma once
#include <string>

#include "lib/model/gpt.h"

namespace hg {

// The cache and the working space of N sequences of up to block_size positions, in one arena.
// All N sequences hold the same number of positions.
struct InferState {
    GPTConfig config;
    int N = 0;             // sequences
    int len = 0;           // positions cached per sequence
    Arena<float> memory;
    float* k = nullptr;          // (L, N, block_size, C) each layer's keys, heads contiguous
    float* v = nullptr;          // (L, N, block_size, C) and values
    float* pos_table = nullptr;  // (block_size, C) the sinusoidal table; null otherwise
    float* rope_cos = nullptr;   // (block_size, hs/2) RoPE's cos θ and sin θ; null without rope
    float* rope_sin = nullptr;
    // Working space of one call with P new positions per sequence: R = N·P ≤ N·block_size rows.
    float* x = nullptr;          // (R, C) the residual stream of the new positions
    float* ln = nullptr;         // (R, C) a LayerNorm's output
    float* ln_mean = nullptr;    // (R)
    float* ln_rstd = nullptr;    // (R)
    float* qkv = nullptr;        // (R, 3C)
    float* qk_rstd = nullptr;    // (R, 2·NH) QK-norm's rstd; null without QK-norm
    float* atty = nullptr;       // (R, C) heads' outputs, concatenated
    float* branch = nullptr;     // (R, C) a branch's output before it is added to x
    float* fc = nullptr;         // (R, F) before the MLP's activation (F = 4C, or 2H for SwiGLU)
    float* fc_act = nullptr;     // (R, M) after it (M = 4C, or H)
    float* att = nullptr;        // (N·NH, min(64, block_size)·block_size) attention probabilities:
                                 // a block of up to 64 rows per (b, h)
    float* last = nullptr;       // (N, C) the residual stream at each sequence's last new position
    float* logits = nullptr;     // (N, V) the next token's logits, per sequence
};

// Why the cached path cannot run a model of this config, or "" when it can. Every architectural
// choice of GPTConfig that infer_forward does not implement must be refused here: generation
// then runs the full recompute instead (lib/model/generate.h).
std::string infer_unsupported(const GPTConfig& config);

// Allocates the cache and working space for N sequences (hg::Error for an unsupported config or
// N < 1). Nothing is allocated after this.
void infer_build(InferState& s, const GPTConfig& config, int N);
// Empties the cache (len = 0); the next call starts again at position 0.
inline void infer_reset(InferState& s) { s.len = 0; }

// tokens (N, P): the next P tokens of each sequence, at positions len .. len+P-1. Appends their
// keys and values to the cache, writes s.logits (N, V), the logits after each sequence's last
// new token, and returns s.logits. hg::Error if P < 1 or len + P > block_size. p: the model's
// parameters, of s.config.
const float* infer_forward(InferState& s, const ParameterTensors<float>& p, const int* tokens, int P);

}  // namespace hg
