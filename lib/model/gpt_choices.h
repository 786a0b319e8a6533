// gpt_choices.h — which function runs each layer call of the passes (gpt_passes.cpp). The passes
// name the step; this file makes the choices behind it, so the passes read as the chain:
//   the number type   GPT<float> runs each layer's fast path (x_forward in lib/layers/x.h),
//                     GPT<double> its scalar twin (x_forward_twin, same header), which the
//                     whole-model gradient check needs;
//   the config        LayerNorm or RMSNorm; GELU, ReLU² or SwiGLU (norm_forward and
//                     mlp_activation_forward below, which the cached generation path shares);
//   the plan          flash or materialized attention (the model's ActivationPlan, config.h);
//   bf16              with the model's dtype bfloat16, the products' bf16 variants and the
//                     bf16 copies they read (Layers, at the end);
//   profiling         each call charged to its kind of work when build/bench attached a Profile:
//                     the norms count as LayerNorm, the MLP's activation as GELU, rope and
//                     QK-norm as attention, the soft cap as cross-entropy.
#pragma once
#include <cassert>
#include <cstddef>
#include <type_traits>

#include "lib/core/profile.h"
#include "lib/core/rng.h"
#include "lib/kernels/matmul_bf16.h"  // which way the bf16 products run, for flash attention's tiles
#include "lib/layers/layers.h"
#include "lib/model/config.h"
#include "lib/model/gpt.h"

namespace hg {

// The number type whose layers run their fast paths; double runs the scalar twins.
template <typename real>
constexpr bool kFastPath = std::is_same_v<real, float>;

namespace choice {

// out = norm(inp): LayerNorm (keeps mean and rstd) or RMSNorm (keeps rstd; mean and bias are
// null, and RMSNorm subtracts no mean).
template <typename real>
void norm_forward(const GPTConfig& c, real* out, real* mean, real* rstd, const real* inp, const real* weight,
                  const real* bias, int N, int C) {
    if (c.norm == NormKind::RMSNorm) {
        if constexpr (kFastPath<real>) rmsnorm_forward(out, rstd, inp, weight, N, C);
        else rmsnorm_forward_twin(out, rstd, inp, weight, N, C);
    } else {
        if constexpr (kFastPath<real>) layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
        else layernorm_forward_twin(out, mean, rstd, inp, weight, bias, N, C);
    }
}

// dinp += the gradient through the norm (both add: the residual's backward, layers.h).
template <typename real>
void norm_backward(const GPTConfig& c, real* dinp, real* dweight, real* dbias, const real* dout, const real* inp,
                   const real* weight, const real* mean, const real* rstd, int N, int C) {
    if (c.norm == NormKind::RMSNorm) {
        if constexpr (kFastPath<real>) rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
        else rmsnorm_backward_twin(dinp, dweight, dout, inp, weight, rstd, N, C);
    } else {
        if constexpr (kFastPath<real>) layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
        else layernorm_backward_twin(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    }
}

// The MLP's activation, (N, F) -> (N, M): GELU or ReLU² elementwise (F = M = 4C), or SwiGLU on
// each row's [gate | up] (F = 2H, M = H).
template <typename real>
void mlp_activation_forward(const GPTConfig& c, real* out, const real* inp, size_t N) {
    const size_t M = c.mlp_hidden();
    if constexpr (kFastPath<real>) {
        switch (c.mlp) {
            case MlpKind::Gelu: return gelu_forward(out, inp, N * M, c.gelu);
            case MlpKind::ReLU2: return relu2_forward(out, inp, N * M);
            case MlpKind::SwiGLU: return swiglu_forward(out, inp, int(N), int(M));
        }
    } else {
        switch (c.mlp) {
            case MlpKind::Gelu: return gelu_forward_twin(out, inp, N * M, c.gelu);
            case MlpKind::ReLU2: return relu2_forward_twin(out, inp, N * M);
            case MlpKind::SwiGLU: return swiglu_forward_twin(out, inp, int(N), int(M));
        }
    }
}

// dinp (N, F) = the gradient before the activation, written.
template <typename real>
void mlp_activation_backward(const GPTConfig& c, real* dinp, const real* inp, const real* dout, size_t N) {
    const size_t M = c.mlp_hidden();
    if constexpr (kFastPath<real>) {
        switch (c.mlp) {
            case MlpKind::Gelu: return gelu_backward(dinp, inp, dout, N * M, c.gelu);
            case MlpKind::ReLU2: return relu2_backward(dinp, inp, dout, N * M);
            case MlpKind::SwiGLU: return swiglu_backward(dinp, inp, dout, int(N), int(M));
        }
    } else {
        switch (c.mlp) {
            case MlpKind::Gelu: return gelu_backward_twin(dinp, inp, dout, N * M, c.gelu);
            case MlpKind::ReLU2: return relu2_backward_twin(dinp, inp, dout, N * M);
            case MlpKind::SwiGLU: return swiglu_backward_twin(dinp, inp, dout, int(N), int(M));
        }
    }
}

}  // namespace choice

// Each dropout site gets its own mask: the key mixes the step's key with (layer, site).
enum DropoutSite { kEmbedding = 0, kAttention = 1, kAttnResidual = 2, kMlpResidual = 3 };
template <typename real>
Dropout dropout_at(const GPT<real>& m, int layer, DropoutSite site) {
    if (!m.training || m.config.dropout == 0.0f) return Dropout{};
    return Dropout{m.config.dropout, mix64(m.dropout_key ^ mix64(uint64_t(layer + 1) * 4 + site))};
}

// The layer calls of one pass over model m, each with its layer's own arguments but the working
// space, which comes from the model. A member runs the layer at the model's precision (above)
// and charges it to its kind of work.
//
// bf16 (m.mixed.on(), float models only). A product's inputs are rounded by the layer that writes
// them, while each piece is in cache: the norm (LayerNorm; RMSNorm writes float and is rounded
// after), the MLP's activation (GELU; ReLU² and SwiGLU rounded after), attention (its output, and
// its gradient unless rope or QK-norm turn that gradient afterwards). The other gradients that
// reach a product — the residual stream's at the two projections, the logits' — are rounded by
// linear_backward itself, into the model's one dout copy. The copies a forward makes are kept in
// m.mixed, one per linear layer's input (input_copy). Everything between the products — norms,
// attention's scores and softmax, GELU, the residual stream, the loss — stays float:
//   the residual stream  each block adds a small update to it; at bf16's 2⁻⁸ an update under
//                        1/256 of the stream would be lost whole;
//   norms' statistics    a mean and a variance are sums of C numbers: rounded inputs would not
//                        cost much, but these are memory-bound passes that gain nothing from bf16;
//   attention            its six products take bf16 inputs, but its scores leave them in float and
//                        the softmax runs in float: e^(s+δ) = e^s·(1 + δ + …), so an absolute error
//                        δ in a score is a relative error δ in its probability, and scores rounded
//                        to bf16 at |s| ≈ 8 would carry δ ≈ 2⁻⁹·8 = 1.6 % more
//                        (lib/layers/attention_bf16.cpp lists what it rounds and what it keeps);
//   the loss             logits leave lm_head's product in float; log-softmax of V numbers
//                        subtracts near-equal ones (logit − logsumexp), which bf16 would ruin.
template <typename real>
struct Layers {
    GPT<real>& m;
    bool backward;  // which half of the profile the calls are charged to

    Layers(GPT<real>& model, bool in_backward) : m(model), backward(in_backward) {
        m.mixed.dout_of = nullptr;  // no rounded gradient carries over from an earlier pass
    }

    bool in_bf16() const {
        if constexpr (kFastPath<real>) return m.mixed.on();
        return false;
    }
    // How flash attention's bf16 tile products run: the way the linear layers' bf16 products run
    // (matmul_bf16.h, set once per run). Where those take the CPU's bf16 dot products (onednn), the
    // tiles take them too (FlashProducts::Bf16Dot); where they are widened to float, so are the
    // tiles. Both ways give the same products up to the order of the float sums; which is faster
    // is a property of the CPU (its dot products against its float FMAs), and the run's choice of
    // the bf16 way, timed on the linear layers' products, is the measurement of it at hand.
    static FlashProducts flash_products() {
        return matmul_bf16_backend() == Bf16Backend::OneDNN ? FlashProducts::Bf16Dot : FlashProducts::Bf16Widened;
    }
    // The bf16 copy of a linear layer's input: a block's ln_1, atty, ln_2 or fc_act, or ln_f.
    bf16* input_copy(const real* inp) const {
        const ActivationTensors<real>& a = m.acts;
        if (inp == a.ln_f) return m.mixed.ln_f;
        for (size_t l = 0; l < a.h.size(); l++) {
            const BlockActivations<real>& s = a.h[l];
            const Bf16Block& c = m.mixed.h[l];
            if (inp == s.ln_1) return c.ln_1;
            if (inp == s.atty) return c.atty;
            if (inp == s.ln_2) return c.ln_2;
            if (inp == s.fc_act) return c.fc_act;
        }
        fail("no bf16 copy of this linear layer's input");
    }
    // dout (n) rounded into the model's one dout copy, unless the layer that wrote it rounded it
    // there already (GELU's and attention's backward: m.mixed.dout_of).
    const bf16* dout_copy(const real* dout, size_t n) {
        const float* rounded = m.mixed.dout_of;
        m.mixed.dout_of = nullptr;
        assert(rounded == nullptr || rounded == dout);  // a copy made for this product, or none
        if (rounded != dout) bf16_round_parallel(m.mixed.dout, dout, n);
        return m.mixed.dout;
    }

    // ---- forward ----
    void encoder_forward(real* out, const int* idx, const real* wte, const real* wpe, int B, int T, int C, int V) {
        const Timed timed(m.profile, Work::Embedding, backward);
        if constexpr (kFastPath<real>) hg::encoder_forward(out, idx, wte, wpe, B, T, C, V);
        else encoder_forward_twin(out, idx, wte, wpe, B, T, C, V);
    }
    // Nothing when drop is off (evaluation, or p = 0).
    void dropout_forward(real* out, const real* inp, size_t n, Dropout drop) {
        const Timed timed(m.profile, Work::Dropout, backward);
        if (!drop.active()) return;
        if constexpr (kFastPath<real>) hg::dropout_forward(out, inp, n, drop);
        else dropout_forward_twin(out, inp, n, drop);
    }
    void norm_forward(real* out, real* mean, real* rstd, const real* inp, const real* weight, const real* bias, int N,
                      int C) {
        const Timed timed(m.profile, Work::Norm, backward);
        if constexpr (kFastPath<real>)
            if (in_bf16()) {  // LayerNorm writes only the rounded copy, its output's one reader
                if (m.config.norm == NormKind::LayerNorm)
                    return layernorm_forward_bf16(input_copy(out), mean, rstd, inp, weight, bias, N, C);
                choice::norm_forward(m.config, out, mean, rstd, inp, weight, bias, N, C);
                return bf16_round_parallel(input_copy(out), out, size_t(N) * C);
            }
        choice::norm_forward(m.config, out, mean, rstd, inp, weight, bias, N, C);
    }
    void linear_forward(real* out, const real* inp, const real* weight, const real* bias, int N, int C, int OC) {
        const Timed timed(m.profile, Work::Matmul, backward);
        if constexpr (kFastPath<real>) {
            if (in_bf16()) return linear_forward_bf16(out, input_copy(inp), m.mixed.copy_of(weight), bias, N, C, OC);
            hg::linear_forward(out, inp, weight, bias, N, C, OC);
        } else {
            linear_forward_twin(out, inp, weight, bias, N, C, OC);
        }
    }
    void rope_forward(real* qkv, const real* cos, const real* sin, int B, int T, int C, int NH) {
        const Timed timed(m.profile, Work::Attention, backward);
        if constexpr (kFastPath<real>) hg::rope_forward(qkv, cos, sin, B, T, C, NH);
        else rope_forward_twin(qkv, cos, sin, B, T, C, NH);
    }
    void qknorm_forward(real* qkv, real* rstd, int B, int T, int C, int NH) {
        const Timed timed(m.profile, Work::Attention, backward);
        if constexpr (kFastPath<real>) hg::qknorm_forward(qkv, rstd, B, T, C, NH);
        else qknorm_forward_twin(qkv, rstd, B, T, C, NH);
    }
    // Which attention runs is chosen here, by the model's plan: flash (flash_attention.h), which
    // keeps lse and leaves att null, or materialized (attention.h: fused kernels or sgemm by shape),
    // which keeps att and leaves lse null; each as its float fast path, its bf16 variant or its twin
    // (at the fast path's tile, so the double model takes the same tiles).
    void attention_forward(real* out, real* att, real* lse, const real* qkv, int B, int T, int C, int NH,
                           Dropout drop) {
        const Timed timed(m.profile, Work::Attention, backward);
        real* scratch = m.scratch.attention;
        const size_t n = m.scratch.attention_numbers;
        if (m.plan.attention == AttentionKind::Flash) {
            if constexpr (kFastPath<real>) {
                if (in_bf16())  // only the rounded copy: c_proj's product and this layer's backward read it
                    return flash_attention_forward_bf16(nullptr, input_copy(out), lse, scratch, n, qkv, B, T, C, NH,
                                                        drop, flash_products());
                return flash_attention_forward(out, lse, scratch, n, qkv, B, T, C, NH, drop);
            }
            return flash_attention_forward_twin(out, lse, qkv, B, T, C, NH, drop, kFlashTile);
        }
        if constexpr (kFastPath<real>) {
            if (in_bf16())
                return attention_forward_bf16(out, input_copy(out), att, scratch, m.mixed.attention, qkv, B, T, C, NH,
                                              drop);
            hg::attention_forward(out, att, scratch, qkv, B, T, C, NH, drop);
        } else {
            attention_forward_twin(out, att, scratch, qkv, B, T, C, NH, drop);
        }
    }
    void residual_forward(real* out, const real* inp1, const real* inp2, size_t n) {
        const Timed timed(m.profile, Work::Residual, backward);
        if constexpr (kFastPath<real>) hg::residual_forward(out, inp1, inp2, n);
        else residual_forward_twin(out, inp1, inp2, n);
    }
    void mlp_activation_forward(real* out, const real* inp, size_t N) {
        const Timed timed(m.profile, Work::MlpActivation, backward);
        const GPTConfig& c = m.config;
        if constexpr (kFastPath<real>)
            if (in_bf16()) {  // GELU writes only the rounded copy, its output's one reader
                if (c.mlp == MlpKind::Gelu) return gelu_forward_bf16(input_copy(out), inp, N * c.mlp_hidden(), c.gelu);
                choice::mlp_activation_forward(c, out, inp, N);
                return bf16_round_parallel(input_copy(out), out, N * c.mlp_hidden());
            }
        choice::mlp_activation_forward(c, out, inp, N);
    }
    void softcap_forward(real* out, const real* inp, size_t n, real cap) {
        const Timed timed(m.profile, Work::CrossEntropy, backward);
        if constexpr (kFastPath<real>) hg::softcap_forward(out, inp, n, cap);
        else softcap_forward_twin(out, inp, n, cap);
    }
    double crossentropy_forward(real* probs, real* losses, const real* logits, const int* targets, int N, int V) {
        const Timed timed(m.profile, Work::CrossEntropy, backward);
        if constexpr (kFastPath<real>) return hg::crossentropy_forward(probs, losses, logits, targets, N, V);
        else return crossentropy_forward_twin(probs, losses, logits, targets, N, V);
    }

    // ---- backward ----
    void crossentropy_backward(real* dlogits, const real* probs, const int* targets, int N, int V, real dloss) {
        const Timed timed(m.profile, Work::CrossEntropy, backward);
        if constexpr (kFastPath<real>) hg::crossentropy_backward(dlogits, probs, targets, N, V, dloss);
        else crossentropy_backward_twin(dlogits, probs, targets, N, V, dloss);
    }
    void softcap_backward(real* dinp, const real* out, const real* dout, size_t n, real cap) {
        const Timed timed(m.profile, Work::CrossEntropy, backward);
        if constexpr (kFastPath<real>) hg::softcap_backward(dinp, out, dout, n, cap);
        else softcap_backward_twin(dinp, out, dout, n, cap);
    }
    void linear_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp, const real* weight,
                         int N, int C, int OC) {
        const Timed timed(m.profile, Work::Matmul, backward);
        if constexpr (kFastPath<real>) {
            if (in_bf16())
                return linear_backward_bf16(dinp, dweight, dbias, dout, dout_copy(dout, size_t(N) * OC),
                                            input_copy(inp), m.mixed.copy_of(weight), N, C, OC);
            hg::linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        } else {
            linear_backward_twin(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        }
    }
    void norm_backward(real* dinp, real* dweight, real* dbias, const real* dout, const real* inp, const real* weight,
                       const real* mean, const real* rstd, int N, int C) {
        const Timed timed(m.profile, Work::Norm, backward);
        choice::norm_backward(m.config, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    }
    // The gradient at the dropout's input: written into dinp and returned, or dout itself
    // (nothing written) when drop is off.
    const real* dropout_backward(real* dinp, const real* dout, size_t n, Dropout drop) {
        const Timed timed(m.profile, Work::Dropout, backward);
        if (!drop.active()) return dout;
        if constexpr (kFastPath<real>) hg::dropout_backward(dinp, dout, n, drop);
        else dropout_backward_twin(dinp, dout, n, drop);
        return dinp;
    }
    void mlp_activation_backward(real* dinp, const real* inp, const real* dout, size_t N) {
        const Timed timed(m.profile, Work::MlpActivation, backward);
        const GPTConfig& c = m.config;
        if constexpr (kFastPath<real>)
            if (in_bf16()) {  // dinp rounded for mlp.c_fc's backward, GELU's while it writes dinp
                m.mixed.dout_of = dinp;
                // c_fc's backward reads the float dinp only for its bias: without one, GELU writes the
                // rounded copy alone
                if (c.mlp == MlpKind::Gelu)
                    return gelu_backward_bf16(c.mlp_bias() ? dinp : nullptr, m.mixed.dout, inp, dout,
                                              N * c.mlp_fc_width(), c.gelu);
                choice::mlp_activation_backward(c, dinp, inp, dout, N);
                return bf16_round_parallel(m.mixed.dout, dinp, N * c.mlp_fc_width());
            }
        choice::mlp_activation_backward(c, dinp, inp, dout, N);
    }
    // out: the forward's output, which flash's backward reads (D = rowsum(dout ∘ out)); in bf16, its
    // rounded copy, the only one the forward wrote.
    void attention_backward(real* dqkv, const real* dout, const real* qkv, const real* out, const real* att,
                            const real* lse, int B, int T, int C, int NH, Dropout drop) {
        const Timed timed(m.profile, Work::Attention, backward);
        real* scratch = m.scratch.attention;
        const size_t n = m.scratch.attention_numbers;
        const bool flash = m.plan.attention == AttentionKind::Flash;
        if constexpr (kFastPath<real>) {
            if (in_bf16()) {  // dqkv rounded for c_attn's backward too, unless rope or QK-norm turn it first
                const bool turned = m.config.qk_norm || m.config.pos == PosEncoding::Rope;
                if (!turned) m.mixed.dout_of = dqkv;
                bf16* dqkv16 = turned ? nullptr : m.mixed.dout;
                // c_attn's backward reads the float dqkv only for its bias: without one, flash writes the
                // rounded copy alone
                float* dqkv_float = turned || m.config.qkv_bias() ? dqkv : nullptr;
                if (flash)
                    return flash_attention_backward_bf16(dqkv_float, dqkv16, scratch, n, dout, qkv, input_copy(out),
                                                         lse, B, T, C, NH, drop, flash_products());
                return attention_backward_bf16(dqkv, dqkv16, scratch, m.mixed.attention, dout, qkv, att, B, T, C, NH,
                                               drop);
            }
            if (flash) return flash_attention_backward(dqkv, scratch, n, dout, qkv, out, lse, B, T, C, NH, drop);
            hg::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
        } else {
            if (flash) return flash_attention_backward_twin(dqkv, dout, qkv, out, lse, B, T, C, NH, drop, kFlashTile);
            attention_backward_twin(dqkv, scratch, dout, qkv, att, B, T, C, NH, drop);
        }
    }
    void qknorm_backward(real* dqkv, const real* qkv, const real* rstd, int B, int T, int C, int NH) {
        const Timed timed(m.profile, Work::Attention, backward);
        if constexpr (kFastPath<real>) hg::qknorm_backward(dqkv, qkv, rstd, B, T, C, NH);
        else qknorm_backward_twin(dqkv, qkv, rstd, B, T, C, NH);
    }
    void rope_backward(real* dqkv, const real* cos, const real* sin, int B, int T, int C, int NH) {
        const Timed timed(m.profile, Work::Attention, backward);
        if constexpr (kFastPath<real>) hg::rope_backward(dqkv, cos, sin, B, T, C, NH);
        else rope_backward_twin(dqkv, cos, sin, B, T, C, NH);
    }
    void encoder_backward(real* dwte, real* dwpe, const real* dout, const int* idx, int B, int T, int C) {
        const Timed timed(m.profile, Work::Embedding, backward);
        if constexpr (kFastPath<real>) hg::encoder_backward(dwte, dwpe, dout, idx, B, T, C);
        else encoder_backward_twin(dwte, dwpe, dout, idx, B, T, C);
    }
};

}  // namespace hg
