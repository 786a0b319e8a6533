// infer.cpp — the cached forward pass (see infer.h).
#include "lib/model/infer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/kernels/matmul.h"
#include "lib/kernels/softmax_kernels.h"
#include "lib/layers/layers.h"
#include "lib/model/gpt_choices.h"

namespace hg {

using choice::mlp_activation_forward;
using choice::norm_forward;

constexpr int kRowBlock = 64;  // new positions whose scores one pair of sgemm calls computes

// The cached path implements every choice GPTConfig has today: positions learned, sinusoidal
// or rotary; LayerNorm or RMSNorm; GELU, ReLU² or SwiGLU; QK-norm; the logit soft cap. A choice
// added to GPTConfig later is refused here (generation then recomputes the whole context) until
// it is written into block_forward below.
std::string infer_unsupported(const GPTConfig& c) {
    (void)c;
    return "";
}

void infer_build(InferState& s, const GPTConfig& c, int N) {
    c.validate();
    const std::string unsupported = infer_unsupported(c);
    check(unsupported.empty(), "the KV cache does not support {}", unsupported);
    check(N >= 1, "the KV cache needs at least one sequence (got {})", N);
    s.config = c, s.N = N, s.len = 0;
    const size_t L = c.n_layer, T = c.block_size, C = c.n_embd, V = c.vocab_size, NH = c.n_head;
    const size_t R = size_t(N) * T;  // the most rows one call can have
    const size_t hs = C / NH, F = c.mlp_fc_width(), M = c.mlp_hidden();
    // Each piece starts 64-byte aligned; a first walk with base == nullptr only counts.
    auto carve = [&](float* base) {
        size_t used = 0;
        auto take = [&](size_t n) {
            float* p = base ? base + used : nullptr;
            used += (n + 15) / 16 * 16;
            return p;
        };
        s.k = take(L * N * T * C), s.v = take(L * N * T * C);
        s.pos_table = c.pos == PosEncoding::Sinusoidal ? take(T * C) : nullptr;
        const bool rope = c.pos == PosEncoding::Rope;
        s.rope_cos = rope ? take(T * hs / 2) : nullptr;
        s.rope_sin = rope ? take(T * hs / 2) : nullptr;
        s.x = take(R * C), s.ln = take(R * C), s.ln_mean = take(R), s.ln_rstd = take(R);
        s.qkv = take(R * 3 * C), s.atty = take(R * C), s.branch = take(R * C);
        s.qk_rstd = c.qk_norm ? take(R * 2 * NH) : nullptr;
        s.fc = take(R * F), s.fc_act = take(R * M);
        s.att = take(N * NH * std::min<size_t>(kRowBlock, T) * T);
        s.last = take(N * C), s.logits = take(N * V);
        return used;
    };
    s.memory.allocate(carve(nullptr));
    carve(s.memory.data());
    if (s.pos_table) sinusoidal_table(s.pos_table, c.block_size, c.n_embd);
    if (s.rope_cos) rope_table(s.rope_cos, s.rope_sin, c.block_size, c.n_embd / c.n_head, c.rope_base);
}

// Copies the keys and values of the new positions (the K and V parts of their qkv rows) into
// one layer's cache at positions t0 .. t0+P-1.
// k, v (N, Tmax, C); qkv (N·P, 3C).
static void cache_append(float* k, float* v, const float* qkv, int N, int P, int t0, int Tmax, int C) {
    for (int b = 0; b < N; b++)
        for (int p = 0; p < P; p++) {
            const float* qkv_bp = qkv + (size_t(b) * P + p) * 3 * C;
            const size_t at = (size_t(b) * Tmax + t0 + p) * C;
            std::memcpy(k + at, qkv_bp + C, sizeof(float) * C);
            std::memcpy(v + at, qkv_bp + 2 * C, sizeof(float) * C);
        }
}

// Attention of the new positions over the cache. For sequence b, head h, and a new position
// t = t0 + p, which sees the cached positions s ≤ t (its own included):
//   att[s] = q_t · k_s / √hs                     s = 0 .. t
//   att    = softmax(att)                         the same row softmax as attention_forward
//   out_t  = Σ_{s ≤ t} att[s] · v_s
// One new position (a generation step) is one row: (1, hs)·(t+1, hs)ᵀ, then (1, t+1)·(t+1, hs).
// Many (a prompt, a refill) go in blocks of up to kRowBlock rows [t1, t2), each block one sgemm
// over the keys 0 .. t2-1 that its last row sees; a row's entries past its own t are masked to
// probability 0, so that the product with v adds nothing from them (the causal mask).
// As in attention_forward, each (b, h) is one task and its rows run in order, so the result
// does not depend on the number of threads.
// out (N·P, C) written; att (N·NH, min(kRowBlock, Tmax)·Tmax) working space; qkv (N·P, 3C), of which the q
// parts are read; k, v (N, Tmax, C), one layer's cache, holding positions 0 .. t0+P-1.
static void cached_attention_forward(float* out, float* att, const float* qkv, const float* k,
                                     const float* v, int N, int P, int t0, int Tmax, int C, int NH) {
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < N * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const float* q = qkv + size_t(b) * P * C3 + size_t(h) * hs;    // (P, hs), row stride 3C
        const float* k_bh = k + size_t(b) * Tmax * C + size_t(h) * hs;  // (Tmax, hs), row stride C
        const float* v_bh = v + size_t(b) * Tmax * C + size_t(h) * hs;  // (Tmax, hs), row stride C
        float* out_bh = out + size_t(b) * P * C + size_t(h) * hs;       // (P, hs), row stride C
        float* att_bh = att + size_t(bh) * std::min(kRowBlock, Tmax) * Tmax;  // (rows, t2) used
        for (int p1 = 0; p1 < P; p1 += kRowBlock) {
            const int rows = std::min(kRowBlock, P - p1), t1 = t0 + p1, t2 = t1 + rows;
            // att[r, s] = q_{t1+r} · k_s / √hs for s in [0, t2)
            matmul_nt({att_bh, rows, t2, t2}, {q + size_t(p1) * C3, rows, hs, C3}, {k_bh, t2, hs, C}, scale, 0.0f);
            for (int r = 0; r < rows; r++) {
                float* att_t = att_bh + size_t(r) * t2;
                const int t = t1 + r;
                softmax_row(att_t, att_t, size_t(t) + 1);
                std::fill(att_t + t + 1, att_t + t2, 0.0f);  // s > t: masked
            }
            // out[t1:t2] = att · v[0:t2]   (rows, t2)·(t2, hs)
            matmul_nn({out_bh + size_t(p1) * C, rows, hs, C}, {att_bh, rows, t2, t2}, {v_bh, t2, hs, C}, 1.0f, 0.0f);
        }
    }
}

// One block on the R = N·P new rows of s.x, in place: gpt_forward's block, line for line and in
// its order, with attention reading the cache. A choice added to the block goes here, in the
// same place as in gpt_forward (and into infer_unsupported until it does).
static void block_forward(InferState& s, const BlockParameters<float>& w, float* k, float* v, int P) {
    const GPTConfig& c = s.config;
    const int N = s.N, C = c.n_embd, NH = c.n_head, Tmax = c.block_size, hs = C / NH;
    const int F = c.mlp_fc_width(), M = c.mlp_hidden();
    const int R = N * P;
    const size_t RC = size_t(R) * C;
    // x += attn(norm_1(x))
    norm_forward(c, s.ln, s.ln_mean, s.ln_rstd, s.x, w.ln_1_w, w.ln_1_b, R, C);
    linear_forward(s.qkv, s.ln, w.attn_w, w.attn_b, R, C, 3 * C);  // (R, 3C)
    // Rotary positions: the new rows are positions len .. len+P-1, so the table from row len on.
    // A cached key is stored rotated, as attention reads it.
    if (s.rope_cos)
        rope_forward(s.qkv, s.rope_cos + size_t(s.len) * hs / 2, s.rope_sin + size_t(s.len) * hs / 2, N, P, C, NH);
    if (c.qk_norm) qknorm_forward(s.qkv, s.qk_rstd, N, P, C, NH);
    cache_append(k, v, s.qkv, N, P, s.len, Tmax, C);
    cached_attention_forward(s.atty, s.att, s.qkv, k, v, N, P, s.len, Tmax, C, NH);
    linear_forward(s.branch, s.atty, w.attn_proj_w, w.attn_proj_b, R, C, C);
    residual_forward(s.x, s.x, s.branch, RC);
    // x += mlp(norm_2(x))
    norm_forward(c, s.ln, s.ln_mean, s.ln_rstd, s.x, w.ln_2_w, w.ln_2_b, R, C);
    linear_forward(s.fc, s.ln, w.fc_w, w.fc_b, R, C, F);  // (R, F)
    mlp_activation_forward(c, s.fc_act, s.fc, size_t(R));  // (R, M)
    linear_forward(s.branch, s.fc_act, w.mlp_proj_w, w.mlp_proj_b, R, M, C);
    residual_forward(s.x, s.x, s.branch, RC);
}

const float* infer_forward(InferState& s, const ParameterTensors<float>& p, const int* tokens, int P) {
    const GPTConfig& c = s.config;
    check(P >= 1, "infer_forward: at least one new position is needed (got {})", P);
    check(s.len + P <= c.block_size, "infer_forward: {} cached + {} new positions exceed block_size {}", s.len, P,
          c.block_size);
    const int N = s.N, C = c.n_embd, V = c.vocab_size, L = c.n_layer;
    const size_t layer_cache = size_t(N) * c.block_size * C;  // one layer's keys (or values)
    // The new positions' embeddings: the position table from row len on (none with rope, whose
    // positions enter in every block's attention instead).
    const float* table = c.pos == PosEncoding::Learned ? p.wpe : s.pos_table;
    const float* wpe = table ? table + size_t(s.len) * C : nullptr;
    encoder_forward(s.x, tokens, p.wte, wpe, N, P, C, V);  // (N·P, C)
    for (int l = 0; l < L; l++) block_forward(s, p.h[l], s.k + l * layer_cache, s.v + l * layer_cache, P);
    s.len += P;
    // Logits for each sequence's last new position only: the next token's.
    for (int b = 0; b < N; b++)
        std::memcpy(s.last + size_t(b) * C, s.x + (size_t(b) * P + P - 1) * C, sizeof(float) * C);
    norm_forward(c, s.ln, s.ln_mean, s.ln_rstd, s.last, p.ln_f_w, p.ln_f_b, N, C);
    const float* no_bias = nullptr;
    linear_forward(s.logits, s.ln, p.lm_head, no_bias, N, C, V);  // (N, V)
    if (c.logit_softcap > 0.0f) softcap_forward(s.logits, s.logits, size_t(N) * V, c.logit_softcap);
    return s.logits;
}

}  // namespace hg
