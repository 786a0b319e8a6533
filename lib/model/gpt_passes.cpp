// gpt_passes.cpp — the forward and backward passes (see gpt.h); the tensor table, the arenas
// and the initialisation are in gpt.cpp.
#include <cstring>
#include <type_traits>

#include "lib/core/rng.h"
#include "lib/layers/layers.h"
#include "lib/model/gpt.h"
#include "lib/model/gpt_choices.h"

namespace hg {

// Each layer name below is its float fast path and its scalar twin at once: GPT<float> calls the
// first, GPT<double> the second (lib/layers/layers.h). The choices of GPTConfig (which norm,
// which MLP activation) are one call each, from gpt_choices.h.
using namespace twin;
using namespace choice;

// ----------------------------------------------------------------------------------------------
// Forward and backward. Each call goes through `timed`, which charges it to its kind of work
// when build/bench has attached a Profile (lib/core/profile.h) and is otherwise just the call: the
// norms count as LayerNorm, the MLP's activation as GELU, rope and QK-norm as attention, the
// soft cap as cross-entropy.

// Each dropout site gets its own mask: the key mixes the step's key with (layer, site).
enum DropoutSite { kEmbedding = 0, kAttention = 1, kAttnResidual = 2, kMlpResidual = 3 };
template <typename real>
static Dropout dropout_at(const GPT<real>& m, int layer, DropoutSite site) {
    if (!m.training || m.config.dropout == 0.0f) return Dropout{};
    return Dropout{m.config.dropout, mix64(m.dropout_key ^ mix64(uint64_t(layer + 1) * 4 + site))};
}

// x = dropout(x) at a site, in place; nothing when dropout is off.
template <typename real>
static void dropout_at_site(const GPT<real>& m, real* x, size_t n, int layer, DropoutSite site) {
    const Dropout drop = dropout_at(m, layer, site);
    if (drop.active()) dropout_forward(x, x, n, drop);
}

// The gradient before a dropout site, given the one after it: dout itself when dropout is off,
// else dout ⊙ mask / (1 - p), written into ddrop.
template <typename real>
static const real* dropout_at_site_backward(const GPT<real>& m, real* ddrop, const real* dout, size_t n, int layer,
                                            DropoutSite site) {
    const Dropout drop = dropout_at(m, layer, site);
    if (!drop.active()) return dout;
    dropout_backward(ddrop, dout, n, drop);
    return ddrop;
}

// A linear layer at the model's precision. Float and double models run linear_forward /
// linear_backward (the float fast path and the double twin); a float model with bf16 on runs the
// same layer with bf16 products (lib/layers/linear.h): inp16 is this layer's input rounded (by
// the layer that wrote it, below) and read again by its backward. Everything between the products —
// norms, attention's scores and softmax, GELU, the residual stream, the loss — stays float:
//   the residual stream  each block adds a small update to it; at bf16's 2⁻⁸ an update under
//                        1/256 of the stream would be lost whole;
//   norms' statistics    a mean and a variance are sums of C numbers: rounded inputs would not
//                        cost much, but these are memory-bound passes that gain nothing from bf16;
//   attention            its six products take bf16 inputs (attention_fwd below), but its scores
//                        leave them in float and the softmax runs in float: e^(s+δ) = e^s·(1 + δ + …),
//                        so an absolute error δ in a score is a relative error δ in its probability,
//                        and scores rounded to bf16 at |s| ≈ 8 would carry δ ≈ 2⁻⁹·8 = 1.6 % more
//                        (lib/layers/attention.h lists what it rounds and what it keeps);
//   the loss             logits leave lm_head's product in float; log-softmax of V numbers
//                        subtracts near-equal ones (logit − logsumexp), which bf16 would ruin.
template <typename real>
static void linear_fwd(const GPT<real>& m, real* out, const real* inp, const bf16* inp16, const real* w, const real* b,
                       int N, int C, int OC) {
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on()) return linear_forward_bf16(out, inp16, m.mixed.copy_of(w), b, N, C, OC);
    linear_forward(out, inp, w, b, N, C, OC);
}
template <typename real>
static void linear_bwd(const GPT<real>& m, real* dinp, real* dw, real* db, const real* dout, const bf16* dout16,
                       const real* inp, const bf16* inp16, const real* w, int N, int C, int OC) {
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on())
            return linear_backward_bf16(dinp, dw, db, dout, dout16, inp16, m.mixed.copy_of(w), N, C, OC);
    linear_backward(dinp, dw, db, dout, inp, w, N, C, OC);
}
// With bf16 on, a product's inputs are rounded by the layer that writes them, while each piece
// is in cache: the norm (LayerNorm; RMSNorm writes float and is rounded after), the MLP's
// activation (GELU; ReLU² and SwiGLU rounded after), attention (its output, and its gradient
// unless rope or QK-norm turn that gradient afterwards). The other gradients that reach a
// product — the residual stream's at the two projections, the logits' — are rounded in a pass
// of their own (round_dout). Into the copy out16; out itself is then not written where the
// layer says so (the norm and GELU: the products read only out16).
template <typename real>
static void norm_fwd(const GPT<real>& m, real* out, bf16* out16, real* mean, real* rstd, const real* inp,
                     const real* weight, const real* bias, int N, int C) {
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on()) {
            if (m.config.norm == NormKind::LayerNorm)
                return layernorm_forward_bf16(out16, mean, rstd, inp, weight, bias, N, C);
            norm_forward(m.config, out, mean, rstd, inp, weight, bias, N, C);
            return bf16_round_parallel(out16, out, size_t(N) * C);
        }
    norm_forward(m.config, out, mean, rstd, inp, weight, bias, N, C);
}
template <typename real>
static void mlp_activation_fwd(const GPT<real>& m, real* out, bf16* out16, const real* inp, size_t N) {
    const GPTConfig& c = m.config;
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on()) {
            if (c.mlp == MlpKind::Gelu) return gelu_forward_bf16(out16, inp, N * c.mlp_hidden(), c.gelu);
            mlp_activation_forward(c, out, inp, N);
            return bf16_round_parallel(out16, out, N * c.mlp_hidden());
        }
    mlp_activation_forward(c, out, inp, N);
}
template <typename real>
static void mlp_activation_bwd(const GPT<real>& m, real* dinp, bf16* dinp16, const real* inp, const real* dout,
                               size_t N) {
    const GPTConfig& c = m.config;
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on()) {
            if (c.mlp == MlpKind::Gelu) return gelu_backward_bf16(dinp, dinp16, inp, dout, N * c.mlp_fc_width(), c.gelu);
            mlp_activation_backward(c, dinp, inp, dout, N);
            return bf16_round_parallel(dinp16, dinp, N * c.mlp_fc_width());
        }
    mlp_activation_backward(c, dinp, inp, dout, N);
}
// dout rounded into the model's one dout copy, which it returns (null when bf16 is off).
template <typename real>
static const bf16* round_dout(const GPT<real>& m, const real* dout, size_t n) {
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on()) return bf16_round_parallel(m.mixed.dout, dout, n), m.mixed.dout;
    return nullptr;
}
// Attention at the model's precision, as linear_fwd/linear_bwd: with bf16 on, its products take
// bf16 inputs from the one working space m.mixed.attention (lib/layers/attention.h).
template <typename real>
static void attention_fwd(const GPT<real>& m, real* out, bf16* out16, real* att, real* scratch, const real* qkv,
                          int B, int T, Dropout drop) {
    const int C = m.config.n_embd, NH = m.config.n_head;
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on())
            return attention_forward_bf16(out, out16, att, scratch, m.mixed.attention, qkv, B, T, C, NH, drop);
    attention_forward(out, att, scratch, qkv, B, T, C, NH, drop);
}
template <typename real>
static void attention_bwd(const GPT<real>& m, real* dqkv, bf16* dqkv16, real* scratch, const real* dout,
                          const real* qkv, const real* att, int B, int T, Dropout drop) {
    const int C = m.config.n_embd, NH = m.config.n_head;
    if constexpr (std::is_same_v<real, float>)
        if (m.mixed.on())
            return attention_backward_bf16(dqkv, dqkv16, scratch, m.mixed.attention, dout, qkv, att, B, T, C, NH,
                                           drop);
    attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
}
// This block's bf16 copy of an input, or null when bf16 is off.
template <typename real>
static bf16* copy16(const GPT<real>& m, int layer, bf16* Bf16Block::*field) {
    return m.mixed.on() ? m.mixed.h[layer].*field : nullptr;
}

// The attention scores are q·k/√hs with or without QK-norm. With it, every head of q and k has
// unit RMS, so |q·k| ≤ hs and each score lies in [-√hs, √hs] (lib/layers/qknorm.h).
template <typename real>
double gpt_forward(GPT<real>& m, const int* idx, const int* targets, int B, int T, ForwardMode mode) {
    const GPTConfig& c = m.config;
    check(B >= 1 && B <= m.max_B, "batch of {} rows, but the model was built for at most {}", B, m.max_B);
    check(T >= 1 && T <= m.max_T, "sequence of {} tokens, but the model was built for at most {} "
          "(block_size {})", T, m.max_T, c.block_size);
    const int C = c.n_embd, NH = c.n_head, V = c.vocab_size, L = c.n_layer;
    const int F = c.mlp_fc_width(), M = c.mlp_hidden();
    const size_t N = size_t(B) * T, NC = N * C;
    const bool rope = c.pos == PosEncoding::Rope, softcap = c.logit_softcap > 0.0f;
    m.B = B, m.T = T, m.training = mode.training, m.dropout_key = mode.dropout_key;
    std::memcpy(m.inputs, idx, N * sizeof(int));
    m.has_targets = targets != nullptr;
    if (targets) std::memcpy(m.targets, targets, N * sizeof(int));

    const ParameterTensors<real>& p = m.params;
    ActivationTensors<real>& a = m.acts;
    real* datt = m.scratch.datt;  // attention's working space for dropped probabilities
    const real* wpe = c.pos == PosEncoding::Learned ? p.wpe : a.pos_table;  // null with rope
    const Timed timed{m.profile, false};
    timed(Work::Embedding, [&] { encoder_forward(a.encoded, m.inputs, p.wte, wpe, B, T, C, V); });  // (N, C)
    timed(Work::Dropout, [&] { dropout_at_site(m, a.encoded, NC, 0, kEmbedding); });

    const real* x = a.encoded;  // the residual stream entering each block, (N, C)
    for (int l = 0; l < L; l++) {
        const BlockParameters<real>& w = p.h[l];
        BlockActivations<real>& s = a.h[l];
        const Dropout drop = dropout_at(m, l, kAttention);
        // x += attn(norm_1(x)): the branch's output goes straight into res_2, then x is added to it
        bf16* ln_1_16 = copy16(m, l, &Bf16Block::ln_1);
        timed(Work::LayerNorm, [&] { norm_fwd(m, s.ln_1, ln_1_16, s.ln_1_mean, s.ln_1_rstd, x, w.ln_1_w, w.ln_1_b, N, C); });
        timed(Work::Matmul, [&] { linear_fwd(m, s.qkv, s.ln_1, ln_1_16, w.attn_w, w.attn_b, N, C, 3 * C); });  // (N, 3C)
        if (rope) timed(Work::Attention, [&] { rope_forward(s.qkv, a.rope_cos, a.rope_sin, B, T, C, NH); });
        if (c.qk_norm) timed(Work::Attention, [&] { qknorm_forward(s.qkv, s.qk_rstd, B, T, C, NH); });
        bf16* atty16 = copy16(m, l, &Bf16Block::atty);
        timed(Work::Attention, [&] { attention_fwd(m, s.atty, atty16, s.att, datt, s.qkv, B, T, drop); });
        timed(Work::Matmul, [&] { linear_fwd(m, s.res_2, s.atty, atty16, w.attn_proj_w, w.attn_proj_b, N, C, C); });
        timed(Work::Dropout, [&] { dropout_at_site(m, s.res_2, NC, l, kAttnResidual); });
        timed(Work::Residual, [&] { residual_forward(s.res_2, x, s.res_2, NC); });
        // x += mlp(norm_2(x)), the same way into res_3
        bf16 *ln_2_16 = copy16(m, l, &Bf16Block::ln_2), *fc_act16 = copy16(m, l, &Bf16Block::fc_act);
        timed(Work::LayerNorm, [&] { norm_fwd(m, s.ln_2, ln_2_16, s.ln_2_mean, s.ln_2_rstd, s.res_2, w.ln_2_w,
                                              w.ln_2_b, N, C); });
        timed(Work::Matmul, [&] { linear_fwd(m, s.fc, s.ln_2, ln_2_16, w.fc_w, w.fc_b, N, C, F); });  // (N, F)
        timed(Work::Gelu, [&] { mlp_activation_fwd(m, s.fc_act, fc_act16, s.fc, N); });     // (N, M)
        timed(Work::Matmul, [&] { linear_fwd(m, s.res_3, s.fc_act, fc_act16, w.mlp_proj_w, w.mlp_proj_b, N, M, C); });
        timed(Work::Dropout, [&] { dropout_at_site(m, s.res_3, NC, l, kMlpResidual); });
        timed(Work::Residual, [&] { residual_forward(s.res_3, s.res_2, s.res_3, NC); });
        x = s.res_3;
    }
    timed(Work::LayerNorm, [&] { norm_fwd(m, a.ln_f, m.mixed.ln_f, a.ln_f_mean, a.ln_f_rstd, x, p.ln_f_w, p.ln_f_b, N, C); });
    const real* no_bias = nullptr;
    timed(Work::Matmul, [&] { linear_fwd(m, a.logits, a.ln_f, m.mixed.ln_f, p.lm_head, no_bias, N, C, V); });  // (N, V)
    if (softcap)
        timed(Work::CrossEntropy, [&] { softcap_forward(a.logits, a.logits, N * V, real(c.logit_softcap)); });
    if (!targets) return m.loss = 0.0;
    return m.loss = timed(Work::CrossEntropy,
                          [&] { return crossentropy_forward(a.probs, a.losses, a.logits, m.targets, N, V); });
}

template <typename real>
void gpt_zero_grad(GPT<real>& m) {
    m.grads_memory.zero();
}

// The forward pass read bottom to top. Each line is the backward of one forward line. Layers
// write the gradient of their input into a scratch buffer (=) and add into the parameters'
// gradients (+=); only the norms add into their input's gradient, which is the residual
// stream's dx: that add is the residual connection's backward (layers.h). Rope, QK-norm and the
// soft cap turn the gradient in place, as their forwards turn the values. So no scratch is
// zeroed except dx, once.
template <typename real>
void gpt_backward(GPT<real>& m, real dloss) {
    check(m.has_targets, "gpt_backward needs a forward pass with targets");
    const GPTConfig& c = m.config;
    const int B = m.B, T = m.T, C = c.n_embd, NH = c.n_head, V = c.vocab_size, L = c.n_layer;
    const int F = c.mlp_fc_width(), M = c.mlp_hidden();
    const size_t N = size_t(B) * T, NC = N * C;
    const bool rope = c.pos == PosEncoding::Rope, softcap = c.logit_softcap > 0.0f;
    const ParameterTensors<real>& p = m.params;
    ParameterTensors<real>& g = m.grads;
    const ActivationTensors<real>& a = m.acts;
    BackwardScratch<real>& d = m.scratch;
    const real* x_last = L > 0 ? a.h[L - 1].res_3 : a.encoded;
    real* dx = d.dx;  // the gradient of the residual stream, from the top block down
    real* no_bias = nullptr;
    const Timed timed{m.profile, true};

    // loss = CE(logits); logits = softcap(z) or z; z = ln_f · lm_headᵀ; ln_f = norm(x_L)
    timed(Work::CrossEntropy, [&] { crossentropy_backward(d.dlogits, a.probs, m.targets, N, V, dloss); });
    if (softcap)  // dlogits -> dz, in place, from the capped logits the forward left
        timed(Work::CrossEntropy,
              [&] { softcap_backward(d.dlogits, a.logits, d.dlogits, N * V, real(c.logit_softcap)); });
    // Tied weights: logits = ln_f · wteᵀ and x⁰ = wte[idx] + wpe use one matrix, so dL/dwte is the
    // sum of both paths. g.lm_head is g.wte then (one buffer, gpt_build), so this line adds the
    // unembedding's dlogitsᵀ · ln_f (V, C) into dwte, and encoder_backward at the end adds the
    // embedding's scatter on top: the += of every backward is the whole of the accumulation.
    timed(Work::Matmul, [&] { linear_bwd(m, d.dln, g.lm_head, no_bias, d.dlogits, round_dout(m, d.dlogits, N * V),
                                         a.ln_f, m.mixed.ln_f, p.lm_head, N, C, V); });
    std::memset(dx, 0, NC * sizeof(real));  // the one buffer a backward adds into (the norms' dinp)
    timed(Work::LayerNorm, [&] { norm_backward(c, dx, g.ln_f_w, g.ln_f_b, d.dln, x_last, p.ln_f_w, a.ln_f_mean,
                                               a.ln_f_rstd, N, C); });

    for (int l = L - 1; l >= 0; l--) {
        const BlockParameters<real>& w = p.h[l];
        BlockParameters<real>& gw = g.h[l];
        const BlockActivations<real>& s = a.h[l];
        const real* x = l == 0 ? a.encoded : a.h[l - 1].res_3;
        const Dropout drop = dropout_at(m, l, kAttention);
        // res_3 = res_2 + mlp_proj. A sum passes its gradient unchanged to both terms
        // (residual.h), so dx — d res_3 — is also d mlp_proj, read by the MLP branch below;
        // once the branch has added its own part through ln_2, dx is d res_2. No copy.
        // mlp_proj = dropout(fc_act · Wᵀ + b);  fc_act = act(fc);  fc = ln_2 · Wᵀ + b;  ln_2 = norm(res_2)
        const real* dmlp =
            timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, l, kMlpResidual); });
        timed(Work::Matmul, [&] { linear_bwd(m, d.dfc_act, gw.mlp_proj_w, gw.mlp_proj_b, dmlp, round_dout(m, dmlp, NC),
                                             s.fc_act, copy16(m, l, &Bf16Block::fc_act), w.mlp_proj_w, N, M, C); });
        timed(Work::Gelu, [&] { mlp_activation_bwd(m, d.dfc, m.mixed.dout, s.fc, d.dfc_act, N); });
        timed(Work::Matmul, [&] { linear_bwd(m, d.dln, gw.fc_w, gw.fc_b, d.dfc, m.mixed.dout, s.ln_2,
                                             copy16(m, l, &Bf16Block::ln_2), w.fc_w, N, C, F); });
        timed(Work::LayerNorm, [&] { norm_backward(c, dx, gw.ln_2_w, gw.ln_2_b, d.dln, s.res_2, w.ln_2_w,
                                                   s.ln_2_mean, s.ln_2_rstd, N, C); });
        // res_2 = x + attn_proj: the same again. dx is d attn_proj for the attention branch,
        // and becomes d x when ln_1's backward adds the branch's part.
        // attn_proj = dropout(atty · Wᵀ + b);  atty = attention(qk_norm(rope(qkv)));  qkv = ln_1 · Wᵀ + b;
        // ln_1 = norm(x)
        const real* dattn =
            timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, l, kAttnResidual); });
        timed(Work::Matmul, [&] { linear_bwd(m, d.datty, gw.attn_proj_w, gw.attn_proj_b, dattn, round_dout(m, dattn, NC),
                                             s.atty, copy16(m, l, &Bf16Block::atty), w.attn_proj_w, N, C, C); });
        // dqkv's bf16 copy comes from attention itself, unless QK-norm or rope turn dqkv after it
        const bool turned = c.qk_norm || rope;
        timed(Work::Attention, [&] { attention_bwd(m, d.dqkv, turned ? nullptr : m.mixed.dout, d.datt, d.datty, s.qkv,
                                                   s.att, B, T, drop); });
        if (c.qk_norm) timed(Work::Attention, [&] { qknorm_backward(d.dqkv, s.qkv, s.qk_rstd, B, T, C, NH); });
        if (rope) timed(Work::Attention, [&] { rope_backward(d.dqkv, a.rope_cos, a.rope_sin, B, T, C, NH); });
        timed(Work::Matmul, [&] { linear_bwd(m, d.dln, gw.attn_w, gw.attn_b, d.dqkv,
                                             turned ? round_dout(m, d.dqkv, 3 * NC) : m.mixed.dout, s.ln_1,
                                             copy16(m, l, &Bf16Block::ln_1), w.attn_w, N, C, 3 * C); });
        timed(Work::LayerNorm, [&] { norm_backward(c, dx, gw.ln_1_w, gw.ln_1_b, d.dln, x, w.ln_1_w, s.ln_1_mean,
                                                   s.ln_1_rstd, N, C); });
    }
    // encoded = dropout(wte[idx] + wpe)
    const real* denc =
        timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, 0, kEmbedding); });
    // dwte += the scatter of denc's rows (with tied weights onto lm_head's gradient, added above)
    real* dwpe = c.pos == PosEncoding::Learned ? g.wpe : nullptr;
    timed(Work::Embedding, [&] { encoder_backward(g.wte, dwpe, denc, m.inputs, B, T, C); });
}

template double gpt_forward(GPT<float>&, const int*, const int*, int, int, ForwardMode);
template double gpt_forward(GPT<double>&, const int*, const int*, int, int, ForwardMode);
template void gpt_zero_grad(GPT<float>&);
template void gpt_zero_grad(GPT<double>&);
template void gpt_backward(GPT<float>&, float);
template void gpt_backward(GPT<double>&, double);

}  // namespace hg
