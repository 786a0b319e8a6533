// gpt_passes.cpp — the forward and backward passes (see gpt.h); the tensor table, the arenas
// and the initialisation are in gpt.cpp.
//
// Each line is one layer call, `layer.x(...)` with the layer's own arguments: Layers
// (gpt_choices.h) runs x_forward's fast path for GPT<float> (lib/layers/x.h), its scalar twin
// x_forward_twin for GPT<double>, and the bf16 products when the model's dtype is bfloat16, and
// charges each call to bench's profile; the config's choices (which norm, which MLP activation)
// are one call each. The lines themselves are the chain.
#include <cstring>

#include "lib/model/gpt.h"
#include "lib/model/gpt_choices.h"

namespace hg {

// Block l's forward from its input x (N, C), for the last forward's B and T: x += attn(norm_1(x))
// into res_2, then res_2 += mlp(norm_2(res_2)) into res_3. gpt_forward runs it for each block;
// gpt_backward runs it again for a block whose activations the plan did not keep.
// The attention scores are q·k/√hs with or without QK-norm. With it, every head of q and k has
// unit RMS, so |q·k| ≤ hs and each score lies in [-√hs, √hs] (lib/layers/qknorm.h).
template <typename real>
static void block_forward(Layers<real>& layer, GPT<real>& m, int l, const real* x) {
    const GPTConfig& c = m.config;
    const int B = m.B, T = m.T, C = c.n_embd, NH = c.n_head, F = c.mlp_fc_width(), M = c.mlp_hidden();
    const size_t N = size_t(B) * T, NC = N * C;
    const ActivationTensors<real>& a = m.acts;
    const BlockParameters<real>& w = m.params.h[l];
    const BlockActivations<real>& s = a.h[l];
    // x += attn(norm_1(x)): the branch's output goes straight into res_2, then x is added to it
    layer.norm_forward(s.ln_1, s.ln_1_mean, s.ln_1_rstd, x, w.ln_1_w, w.ln_1_b, N, C);
    layer.linear_forward(s.qkv, s.ln_1, w.attn_w, w.attn_b, N, C, 3 * C);  // (N, 3C)
    if (c.pos == PosEncoding::Rope) layer.rope_forward(s.qkv, a.rope_cos, a.rope_sin, B, T, C, NH);
    if (c.qk_norm) layer.qknorm_forward(s.qkv, s.qk_rstd, B, T, C, NH);
    layer.attention_forward(s.atty, s.att, s.lse, s.qkv, B, T, C, NH, dropout_at(m, l, kAttention));
    layer.linear_forward(s.res_2, s.atty, w.attn_proj_w, w.attn_proj_b, N, C, C);
    layer.dropout_forward(s.res_2, s.res_2, NC, dropout_at(m, l, kAttnResidual));
    layer.residual_forward(s.res_2, x, s.res_2, NC);
    // x += mlp(norm_2(x)), the same way into res_3
    layer.norm_forward(s.ln_2, s.ln_2_mean, s.ln_2_rstd, s.res_2, w.ln_2_w, w.ln_2_b, N, C);
    layer.linear_forward(s.fc, s.ln_2, w.fc_w, w.fc_b, N, C, F);  // (N, F)
    layer.mlp_activation_forward(s.fc_act, s.fc, N);             // (N, M)
    layer.linear_forward(s.res_3, s.fc_act, w.mlp_proj_w, w.mlp_proj_b, N, M, C);
    layer.dropout_forward(s.res_3, s.res_3, NC, dropout_at(m, l, kMlpResidual));
    layer.residual_forward(s.res_3, s.res_2, s.res_3, NC);
}

template <typename real>
double gpt_forward(GPT<real>& m, const int* idx, const int* targets, int B, int T, ForwardMode mode) {
    const GPTConfig& c = m.config;
    check(B >= 1 && B <= m.max_B, "batch of {} rows, but the model was built for at most {}", B, m.max_B);
    check(T >= 1 && T <= m.max_T, "sequence of {} tokens, but the model was built for at most {} "
          "(block_size {})", T, m.max_T, c.block_size);
    const int C = c.n_embd, V = c.vocab_size, L = c.n_layer;
    const size_t N = size_t(B) * T, NC = N * C;
    m.B = B, m.T = T, m.training = mode.training, m.dropout_key = mode.dropout_key;
    std::memcpy(m.inputs, idx, N * sizeof(int));
    m.has_targets = targets != nullptr;
    if (targets) std::memcpy(m.targets, targets, N * sizeof(int));

    const ParameterTensors<real>& p = m.params;
    ActivationTensors<real>& a = m.acts;
    const real* wpe = c.pos == PosEncoding::Learned ? p.wpe : a.pos_table;  // null with rope
    Layers<real> layer(m, false);

    layer.encoder_forward(a.encoded, m.inputs, p.wte, wpe, B, T, C, V);  // (N, C)
    layer.dropout_forward(a.encoded, a.encoded, NC, dropout_at(m, 0, kEmbedding));
    const real* x = a.encoded;  // the residual stream entering each block, (N, C)
    for (int l = 0; l < L; l++) {
        block_forward(layer, m, l, x);
        x = a.h[l].res_3;
    }
    layer.norm_forward(a.ln_f, a.ln_f_mean, a.ln_f_rstd, x, p.ln_f_w, p.ln_f_b, N, C);
    layer.linear_forward(a.logits, a.ln_f, p.lm_head, nullptr, N, C, V);  // (N, V)
    if (c.logit_softcap > 0.0f) layer.softcap_forward(a.logits, a.logits, N * V, real(c.logit_softcap));
    if (!targets) return m.loss = 0.0;
    return m.loss = layer.crossentropy_forward(a.probs, a.losses, a.logits, m.targets, N, V);
}

// What the plan did not keep of block l, computed again from what it kept, by the forward's own
// calls with the forward's dropout keys: the same bits as the forward's. Recompute::Attention reruns
// attention (atty and att or lse, from the kept qkv), Recompute::Block the whole block from its input x.
template <typename real>
static void recompute_forward(Layers<real>& layer, GPT<real>& m, int l, const real* x) {
    const BlockActivations<real>& s = m.acts.h[l];
    const int C = m.config.n_embd, NH = m.config.n_head;
    switch (m.plan.recompute) {
        case Recompute::None: return;
        case Recompute::Attention:
            return layer.attention_forward(s.atty, s.att, s.lse, s.qkv, m.B, m.T, C, NH, dropout_at(m, l, kAttention));
        case Recompute::Block: return block_forward(layer, m, l, x);
    }
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
    Scratch<real>& d = m.scratch;
    const real* x_last = L > 0 ? a.h[L - 1].res_3 : a.encoded;
    real* dx = d.dx;  // the gradient of the residual stream, from the top block down
    Layers<real> layer(m, true);

    // loss = CE(logits); logits = softcap(z) or z; z = ln_f · lm_headᵀ; ln_f = norm(x_L)
    layer.crossentropy_backward(d.dlogits, a.probs, m.targets, N, V, dloss);
    if (softcap) layer.softcap_backward(d.dlogits, a.logits, d.dlogits, N * V, real(c.logit_softcap));  // dz, in place
    // Tied weights: logits = ln_f · wteᵀ and x⁰ = wte[idx] + wpe use one matrix, so dL/dwte is the
    // sum of both paths. g.lm_head is g.wte then (one pointer: walk_parameters in gpt.cpp), so this
    // line adds the unembedding's dlogitsᵀ · ln_f (V, C) into dwte, and encoder_backward at the end
    // adds the embedding's scatter on top: the += of every backward is the whole of the accumulation.
    layer.linear_backward(d.dln_f, g.lm_head, nullptr, d.dlogits, a.ln_f, p.lm_head, N, C, V);
    std::memset(dx, 0, NC * sizeof(real));  // the one buffer a backward adds into (the norms' dinp)
    layer.norm_backward(dx, g.ln_f_w, g.ln_f_b, d.dln_f, x_last, p.ln_f_w, a.ln_f_mean, a.ln_f_rstd, N, C);

    for (int l = L - 1; l >= 0; l--) {
        const BlockParameters<real>& w = p.h[l];
        BlockParameters<real>& gw = g.h[l];
        const BlockActivations<real>& s = a.h[l];
        const real* x = l == 0 ? a.encoded : a.h[l - 1].res_3;
        // the block's activations the plan did not keep; the last block's are still in the buffers
        // the blocks share, from the forward
        if (l < L - 1) recompute_forward(layer, m, l, x);
        // res_3 = res_2 + mlp_proj. A sum passes its gradient unchanged to both terms
        // (residual.h), so dx — d res_3 — is also d mlp_proj, read by the MLP branch below;
        // once the branch has added its own part through ln_2, dx is d res_2. No copy.
        // mlp_proj = dropout(fc_act · Wᵀ + b);  fc_act = act(fc);  fc = ln_2 · Wᵀ + b;  ln_2 = norm(res_2)
        const real* dmlp = layer.dropout_backward(d.ddrop, dx, NC, dropout_at(m, l, kMlpResidual));
        layer.linear_backward(d.dfc_act, gw.mlp_proj_w, gw.mlp_proj_b, dmlp, s.fc_act, w.mlp_proj_w, N, M, C);
        layer.mlp_activation_backward(d.dfc, s.fc, d.dfc_act, N);
        layer.linear_backward(d.dln_2, gw.fc_w, gw.fc_b, d.dfc, s.ln_2, w.fc_w, N, C, F);
        layer.norm_backward(dx, gw.ln_2_w, gw.ln_2_b, d.dln_2, s.res_2, w.ln_2_w, s.ln_2_mean, s.ln_2_rstd, N, C);
        // res_2 = x + attn_proj: the same again. dx is d attn_proj for the attention branch,
        // and becomes d x when ln_1's backward adds the branch's part.
        // attn_proj = dropout(atty · Wᵀ + b);  atty = attention(qk_norm(rope(qkv)));  qkv = ln_1 · Wᵀ + b;
        // ln_1 = norm(x)
        const real* dattn = layer.dropout_backward(d.ddrop, dx, NC, dropout_at(m, l, kAttnResidual));
        layer.linear_backward(d.datty, gw.attn_proj_w, gw.attn_proj_b, dattn, s.atty, w.attn_proj_w, N, C, C);
        layer.attention_backward(d.dqkv, d.datty, s.qkv, s.atty, s.att, s.lse, B, T, C, NH,
                                 dropout_at(m, l, kAttention));
        if (c.qk_norm) layer.qknorm_backward(d.dqkv, s.qkv, s.qk_rstd, B, T, C, NH);
        if (rope) layer.rope_backward(d.dqkv, a.rope_cos, a.rope_sin, B, T, C, NH);
        layer.linear_backward(d.dln_1, gw.attn_w, gw.attn_b, d.dqkv, s.ln_1, w.attn_w, N, C, 3 * C);
        layer.norm_backward(dx, gw.ln_1_w, gw.ln_1_b, d.dln_1, x, w.ln_1_w, s.ln_1_mean, s.ln_1_rstd, N, C);
    }
    // encoded = dropout(wte[idx] + wpe)
    const real* denc = layer.dropout_backward(d.ddrop, dx, NC, dropout_at(m, 0, kEmbedding));
    // dwte += the scatter of denc's rows (with tied weights onto lm_head's gradient, added above)
    real* dwpe = c.pos == PosEncoding::Learned ? g.wpe : nullptr;
    layer.encoder_backward(g.wte, dwpe, denc, m.inputs, B, T, C);
}

template double gpt_forward(GPT<float>&, const int*, const int*, int, int, ForwardMode);
template double gpt_forward(GPT<double>&, const int*, const int*, int, int, ForwardMode);
template void gpt_zero_grad(GPT<float>&);
template void gpt_zero_grad(GPT<double>&);
template void gpt_backward(GPT<float>&, float);
template void gpt_backward(GPT<double>&, double);

}  // namespace hg
