// gpt.cpp — the tensor table, the arenas, and the forward and backward passes (see gpt.h).
#include "lib/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/layers/layers.h"
#include "lib/memory_check.h"
#include "lib/rng.h"

namespace hg {

// Each layer name below is its float fast path and its scalar twin at once: GPT<float> calls the
// first, GPT<double> the second (lib/layers/layers.h).
using namespace twin;

// ----------------------------------------------------------------------------------------------
// The tensor table. walk_parameters lists every parameter once, in checkpoint order, naming
// the field of ParameterTensors it lives in and what the tensor is (role, fan-in). The table,
// the arena views and the initialisation are all made from this one walk, so sizes, views,
// names, decay flags and init rules cannot drift apart.

// A row of the table, its offset left for the caller. Weight decay goes with the role: the 2-D
// tensors (weights and embeddings) decay; biases and LayerNorm parameters do not.
static TensorSpec spec(std::string name, Shape shape, Component component, Role role, size_t fan_in,
                       bool residual = false) {
    const bool decays = role == Role::Weight || role == Role::Embedding;
    return TensorSpec{std::move(name), shape, decays, component, role, fan_in, residual, 0};
}

template <typename real, typename Visit>
static void walk_parameters(const GPTConfig& c, ParameterTensors<real>& p, Visit&& visit) {
    const size_t V = c.vocab_size, C = c.n_embd;
    using K = Component;
    // out = inp · Wᵀ + b, W (out, in): both tensors have fan-in `in`.
    auto linear = [&](const std::string& name, K k, size_t out, size_t in, bool has_bias, bool residual,
                      real*& w, real*& b) {
        visit(spec(name + ".weight", Shape{out, in}, k, Role::Weight, in, residual), w);
        if (has_bias) visit(spec(name + ".bias", Shape{out}, k, Role::Bias, in, residual), b);
    };
    auto layernorm = [&](const std::string& name, K k, real*& w, real*& b) {
        visit(spec(name + ".weight", Shape{C}, k, Role::LayerNormWeight, 1), w);
        if (c.ln_bias()) visit(spec(name + ".bias", Shape{C}, k, Role::LayerNormBias, 1), b);
    };
    visit(spec("transformer.wte.weight", Shape{V, C}, K::Embedding, Role::Embedding, 1), p.wte);
    if (c.pos == PosEncoding::Learned)
        visit(spec("transformer.wpe.weight", Shape{size_t(c.block_size), C}, K::Embedding, Role::Embedding, 1), p.wpe);
    p.h.assign(c.n_layer, BlockParameters<real>{});
    for (int l = 0; l < c.n_layer; l++) {
        BlockParameters<real>& b = p.h[l];
        const std::string pre = "transformer.h." + std::to_string(l) + ".";
        layernorm(pre + "ln_1", K::BlockLayerNorm, b.ln_1_w, b.ln_1_b);
        linear(pre + "attn.c_attn", K::Attention, 3 * C, C, c.qkv_bias(), false, b.attn_w, b.attn_b);
        linear(pre + "attn.c_proj", K::Attention, C, C, c.attn_proj_bias(), true, b.attn_proj_w, b.attn_proj_b);
        layernorm(pre + "ln_2", K::BlockLayerNorm, b.ln_2_w, b.ln_2_b);
        linear(pre + "mlp.c_fc", K::MLP, 4 * C, C, c.mlp_bias(), false, b.fc_w, b.fc_b);
        linear(pre + "mlp.c_proj", K::MLP, C, 4 * C, c.mlp_bias(), true, b.mlp_proj_w, b.mlp_proj_b);
    }
    layernorm("transformer.ln_f", K::FinalLayerNorm, p.ln_f_w, p.ln_f_b);
    real* no_bias = nullptr;
    if (c.tie_weights)
        p.lm_head = p.wte;  // one tensor, two uses: both gradients add into dwte
    else
        linear("lm_head", K::LMHead, V, C, false, false, p.lm_head, no_bias);
}

std::vector<TensorSpec> parameter_table(const GPTConfig& config) {
    config.validate();
    std::vector<TensorSpec> table;
    ParameterTensors<float> unused{};
    size_t offset = 0;
    walk_parameters(config, unused, [&](TensorSpec t, float*&) {
        t.offset = offset;
        offset += t.shape.numel();
        table.push_back(std::move(t));
    });
    return table;
}

size_t parameter_count(const GPTConfig& config) {
    size_t n = 0;
    for (const TensorSpec& t : parameter_table(config)) n += t.shape.numel();
    return n;
}

template <typename real>
static ParameterTensors<real> bind_parameters(const GPTConfig& config, real* base) {
    ParameterTensors<real> p{};
    size_t offset = 0;
    walk_parameters(config, p, [&](const TensorSpec& t, real*& slot) {
        slot = base + offset;
        offset += t.shape.numel();
    });
    return p;
}

// Hands out consecutive 64-byte-aligned pieces of an arena; with base == nullptr it only
// counts, which is how the arena's size is found before allocating it.
template <typename real>
struct Carver {
    real* base;
    size_t used = 0;
    real* take(size_t n) {
        real* p = base ? base + used : nullptr;
        used += (n + 15) / 16 * 16;
        return p;
    }
};

template <typename real>
static size_t bind_activations(const GPTConfig& c, int B, int T, real* base, ActivationTensors<real>& a) {
    Carver<real> arena{base};
    const size_t N = size_t(B) * T, C = c.n_embd, V = c.vocab_size, NH = c.n_head;
    a.pos_table = c.pos == PosEncoding::Sinusoidal ? arena.take(size_t(c.block_size) * C) : nullptr;
    a.encoded = arena.take(N * C);
    a.h.assign(c.n_layer, BlockActivations<real>{});
    for (BlockActivations<real>& s : a.h) {
        s.ln_1 = arena.take(N * C), s.ln_1_mean = arena.take(N), s.ln_1_rstd = arena.take(N);
        s.qkv = arena.take(N * 3 * C);
        s.att = arena.take(size_t(B) * NH * T * T);
        s.atty = arena.take(N * C), s.res_2 = arena.take(N * C);
        s.ln_2 = arena.take(N * C), s.ln_2_mean = arena.take(N), s.ln_2_rstd = arena.take(N);
        s.fc = arena.take(N * 4 * C), s.fc_gelu = arena.take(N * 4 * C);
        s.res_3 = arena.take(N * C);
    }
    a.ln_f = arena.take(N * C), a.ln_f_mean = arena.take(N), a.ln_f_rstd = arena.take(N);
    a.logits = arena.take(N * V), a.probs = arena.take(N * V), a.losses = arena.take(N);
    return arena.used;
}

template <typename real>
static size_t bind_scratch(const GPTConfig& c, int B, int T, real* base, BackwardScratch<real>& d) {
    Carver<real> arena{base};
    const size_t N = size_t(B) * T, C = c.n_embd, V = c.vocab_size, NH = c.n_head;
    d.dx = arena.take(N * C), d.dln = arena.take(N * C);
    d.dqkv = arena.take(N * 3 * C), d.datty = arena.take(N * C);
    d.ddrop = arena.take(N * C);
    d.dfc = arena.take(N * 4 * C), d.dfc_gelu = arena.take(N * 4 * C);
    d.datt = arena.take(size_t(B) * NH * T * T);
    d.dlogits = arena.take(N * V);
    return arena.used;
}

template <typename real>
void gpt_build(GPT<real>& m, const GPTConfig& config, int max_B, int max_T, const GPT<real>* share_params_of) {
    config.validate();
    check(max_B >= 1, "batch_size must be positive (got {})", max_B);
    check(max_T >= 1 && max_T <= config.block_size,
          "sequence length {} must be in [1, block_size = {}]", max_T, config.block_size);
    m.config = config;
    m.max_B = max_B, m.max_T = max_T;
    m.table = parameter_table(config);
    m.num_parameters = parameter_count(config);
    if (share_params_of) {
        check(share_params_of->num_parameters == m.num_parameters, "a replica must have its model's config");
        m.params = share_params_of->params;
    } else {
        m.params_memory.allocate(m.num_parameters);
        m.params = bind_parameters(config, m.params_memory.data());
    }
    m.grads_memory.allocate(m.num_parameters);
    m.grads = bind_parameters(config, m.grads_memory.data());
    m.acts_memory.allocate(bind_activations<real>(config, max_B, max_T, nullptr, m.acts));
    bind_activations(config, max_B, max_T, m.acts_memory.data(), m.acts);
    m.scratch_memory.allocate(bind_scratch<real>(config, max_B, max_T, nullptr, m.scratch));
    bind_scratch(config, max_B, max_T, m.scratch_memory.data(), m.scratch);
    m.tokens_memory.allocate(2 * size_t(max_B) * max_T);
    m.inputs = m.tokens_memory.data();
    m.targets = m.inputs + size_t(max_B) * max_T;
    if (config.pos == PosEncoding::Sinusoidal)
        sinusoidal_table(m.acts.pos_table, config.block_size, config.n_embd);
}

// Declared in memory_check.h, which compares it with the memory there is.
size_t gpt_activation_floats(const GPTConfig& config, int max_B, int max_T) {
    ActivationTensors<float> acts;
    BackwardScratch<float> scratch;
    return bind_activations<float>(config, max_B, max_T, nullptr, acts) +
           bind_scratch<float>(config, max_B, max_T, nullptr, scratch);
}

// ----------------------------------------------------------------------------------------------
// Initialisation, tensor by tensor in table order, from one seeded generator, by each tensor's
// role and fan-in (the table's):
//   gpt2:    weights and embeddings N(0, 0.02²); the two projections that write into the
//            residual stream (attn.c_proj, mlp.c_proj) N(0, 0.02²/2L), so that the 2L writes
//            add up to the variance of one; biases 0; LayerNorm γ = 1, β = 0.
//   pytorch: nn.Embedding N(0, 1); nn.Linear weight and bias U(−1/√fan_in, 1/√fan_in);
//            LayerNorm γ = 1, β = 0. Its lm_head spreads the logits more (std 1/√(3C) against
//            0.02), so the initial loss sits above ln V.
//   lesson14: Lesson 14's own, each matrix for its fan-in: embeddings N(0, 0.1²) (the lesson's
//            flat 0.1; it has no learned positions, wpe gets the same); c_attn (Q, K, V),
//            attn.c_proj and lm_head N(0, 1/C), so the q·k scores start at unit scale; mlp.c_fc
//            and mlp.c_proj He, N(0, 2/fan_in), matched to the GELU; biases 0; γ = 1, β = 0.
//            lesson14-scaled is the same draw with attn.c_proj and mlp.c_proj times 1/√(2L).
// Constants and zeros draw nothing from the generator.

template <typename real>
real* gpt_own_parameters(GPT<real>& m) {
    check(m.params_memory.size() == m.num_parameters,
          "this model is a replica: its parameters are another model's, which is the one to write");
    return m.params_memory.data();
}

template <typename real>
void gpt_init(GPT<real>& m, uint64_t seed) {
    real* params = gpt_own_parameters(m);
    Rng rng(seed);
    const GPTConfig& c = m.config;
    for (const TensorSpec& t : m.table) {
        real* w = params + t.offset;
        const size_t n = t.shape.numel();
        auto constant = [&](double value) { std::fill(w, w + n, real(value)); };
        auto normal = [&](double std) {
            for (size_t i = 0; i < n; i++) w[i] = real(std * rng.normal());
        };
        auto uniform = [&](double bound) {  // U(-bound, bound)
            for (size_t i = 0; i < n; i++) w[i] = real(bound * (2 * rng.uniform() - 1));
        };
        const double pytorch_bound = 1.0 / std::sqrt(double(t.fan_in));
        switch (t.role) {
            case Role::LayerNormWeight: constant(1); break;
            case Role::LayerNormBias: constant(0); break;
            case Role::Bias:
                if (c.init == InitScheme::PyTorch)
                    uniform(pytorch_bound);
                else
                    constant(0);
                break;
            case Role::Embedding:
                normal(c.init == InitScheme::GPT2 ? 0.02 : c.init == InitScheme::PyTorch ? 1.0 : 0.1);
                break;
            case Role::Weight:
                if (c.init == InitScheme::GPT2) {
                    normal(t.residual ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02);
                } else if (c.init == InitScheme::PyTorch) {
                    uniform(pytorch_bound);
                } else {  // lesson14, lesson14-scaled
                    double std = std::sqrt((t.component == Component::MLP ? 2.0 : 1.0) / double(t.fan_in));
                    if (c.init == InitScheme::Lesson14Scaled && t.residual) std /= std::sqrt(2.0 * c.n_layer);
                    normal(std);
                }
                break;
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Forward and backward. Each call goes through `timed`, which charges it to its kind of work
// when build/bench has attached a Profile (lib/profile.h) and is otherwise just the call.

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

template <typename real>
double gpt_forward(GPT<real>& m, const int* idx, const int* targets, int B, int T, ForwardMode mode) {
    const GPTConfig& c = m.config;
    check(B >= 1 && B <= m.max_B, "batch of {} rows, but the model was built for at most {}", B, m.max_B);
    check(T >= 1 && T <= m.max_T, "sequence of {} tokens, but the model was built for at most {} "
          "(block_size {})", T, m.max_T, c.block_size);
    const int C = c.n_embd, NH = c.n_head, V = c.vocab_size, L = c.n_layer;
    const size_t N = size_t(B) * T, NC = N * C;
    m.B = B, m.T = T, m.training = mode.training, m.dropout_key = mode.dropout_key;
    std::memcpy(m.inputs, idx, N * sizeof(int));
    m.has_targets = targets != nullptr;
    if (targets) std::memcpy(m.targets, targets, N * sizeof(int));

    const ParameterTensors<real>& p = m.params;
    ActivationTensors<real>& a = m.acts;
    real* datt = m.scratch.datt;  // attention's working space for dropped probabilities
    const real* wpe = c.pos == PosEncoding::Learned ? p.wpe : a.pos_table;
    const Timed timed{m.profile, false};
    timed(Work::Embedding, [&] { encoder_forward(a.encoded, m.inputs, p.wte, wpe, B, T, C, V); });  // (N, C)
    timed(Work::Dropout, [&] { dropout_at_site(m, a.encoded, NC, 0, kEmbedding); });

    const real* x = a.encoded;  // the residual stream entering each block, (N, C)
    for (int l = 0; l < L; l++) {
        const BlockParameters<real>& w = p.h[l];
        BlockActivations<real>& s = a.h[l];
        const Dropout drop = dropout_at(m, l, kAttention);
        // x += attn(ln_1(x)): the branch's output goes straight into res_2, then x is added to it
        timed(Work::LayerNorm, [&] { layernorm_forward(s.ln_1, s.ln_1_mean, s.ln_1_rstd, x, w.ln_1_w, w.ln_1_b, N, C); });
        timed(Work::Matmul, [&] { linear_forward(s.qkv, s.ln_1, w.attn_w, w.attn_b, N, C, 3 * C); });  // (N, 3C)
        timed(Work::Attention, [&] { attention_forward(s.atty, s.att, datt, s.qkv, B, T, C, NH, drop); });
        timed(Work::Matmul, [&] { linear_forward(s.res_2, s.atty, w.attn_proj_w, w.attn_proj_b, N, C, C); });
        timed(Work::Dropout, [&] { dropout_at_site(m, s.res_2, NC, l, kAttnResidual); });
        timed(Work::Residual, [&] { residual_forward(s.res_2, x, s.res_2, NC); });
        // x += mlp(ln_2(x)), the same way into res_3
        timed(Work::LayerNorm, [&] { layernorm_forward(s.ln_2, s.ln_2_mean, s.ln_2_rstd, s.res_2, w.ln_2_w, w.ln_2_b,
                                                       N, C); });
        timed(Work::Matmul, [&] { linear_forward(s.fc, s.ln_2, w.fc_w, w.fc_b, N, C, 4 * C); });  // (N, 4C)
        timed(Work::Gelu, [&] { gelu_forward(s.fc_gelu, s.fc, N * 4 * C, c.gelu); });
        timed(Work::Matmul, [&] { linear_forward(s.res_3, s.fc_gelu, w.mlp_proj_w, w.mlp_proj_b, N, 4 * C, C); });
        timed(Work::Dropout, [&] { dropout_at_site(m, s.res_3, NC, l, kMlpResidual); });
        timed(Work::Residual, [&] { residual_forward(s.res_3, s.res_2, s.res_3, NC); });
        x = s.res_3;
    }
    timed(Work::LayerNorm, [&] { layernorm_forward(a.ln_f, a.ln_f_mean, a.ln_f_rstd, x, p.ln_f_w, p.ln_f_b, N, C); });
    const real* no_bias = nullptr;
    timed(Work::Matmul, [&] { linear_forward(a.logits, a.ln_f, p.lm_head, no_bias, N, C, V); });  // (N, V)
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
// gradients (+=); only LayerNorm adds into its input's gradient, which is the residual stream's
// dx: that add is the residual connection's backward (layers.h). So no scratch is zeroed
// except dx, once.
template <typename real>
void gpt_backward(GPT<real>& m, real dloss) {
    check(m.has_targets, "gpt_backward needs a forward pass with targets");
    const GPTConfig& c = m.config;
    const int B = m.B, T = m.T, C = c.n_embd, NH = c.n_head, V = c.vocab_size, L = c.n_layer;
    const size_t N = size_t(B) * T, NC = N * C;
    const ParameterTensors<real>& p = m.params;
    ParameterTensors<real>& g = m.grads;
    const ActivationTensors<real>& a = m.acts;
    BackwardScratch<real>& d = m.scratch;
    const real* x_last = L > 0 ? a.h[L - 1].res_3 : a.encoded;
    real* dx = d.dx;  // the gradient of the residual stream, from the top block down
    real* no_bias = nullptr;
    const Timed timed{m.profile, true};

    // loss = CE(logits); logits = ln_f · lm_headᵀ; ln_f = LN(x_L)
    timed(Work::CrossEntropy, [&] { crossentropy_backward(d.dlogits, a.probs, m.targets, N, V, dloss); });
    // Tied weights: logits = ln_f · wteᵀ and x⁰ = wte[idx] + wpe use one matrix, so dL/dwte is the
    // sum of both paths. g.lm_head is g.wte then (one buffer, gpt_build), so this line adds the
    // unembedding's dlogitsᵀ · ln_f (V, C) into dwte, and encoder_backward at the end adds the
    // embedding's scatter on top: the += of every backward is the whole of the accumulation.
    timed(Work::Matmul, [&] { linear_backward(d.dln, g.lm_head, no_bias, d.dlogits, a.ln_f, p.lm_head, N, C, V); });
    std::memset(dx, 0, NC * sizeof(real));  // the one buffer a backward adds into (LayerNorm's dinp)
    timed(Work::LayerNorm, [&] { layernorm_backward(dx, g.ln_f_w, g.ln_f_b, d.dln, x_last, p.ln_f_w, a.ln_f_mean,
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
        // mlp_proj = dropout(fc_gelu · Wᵀ + b);  fc_gelu = gelu(fc);  fc = ln_2 · Wᵀ + b;  ln_2 = LN(res_2)
        const real* dmlp =
            timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, l, kMlpResidual); });
        timed(Work::Matmul, [&] { linear_backward(d.dfc_gelu, gw.mlp_proj_w, gw.mlp_proj_b, dmlp, s.fc_gelu,
                                                  w.mlp_proj_w, N, 4 * C, C); });
        timed(Work::Gelu, [&] { gelu_backward(d.dfc, s.fc, d.dfc_gelu, N * 4 * C, c.gelu); });
        timed(Work::Matmul, [&] { linear_backward(d.dln, gw.fc_w, gw.fc_b, d.dfc, s.ln_2, w.fc_w, N, C, 4 * C); });
        timed(Work::LayerNorm, [&] { layernorm_backward(dx, gw.ln_2_w, gw.ln_2_b, d.dln, s.res_2, w.ln_2_w,
                                                        s.ln_2_mean, s.ln_2_rstd, N, C); });
        // res_2 = x + attn_proj: the same again. dx is d attn_proj for the attention branch,
        // and becomes d x when ln_1's backward adds the branch's part.
        // attn_proj = dropout(atty · Wᵀ + b);  atty = attention(qkv);  qkv = ln_1 · Wᵀ + b;  ln_1 = LN(x)
        const real* dattn =
            timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, l, kAttnResidual); });
        timed(Work::Matmul, [&] { linear_backward(d.datty, gw.attn_proj_w, gw.attn_proj_b, dattn, s.atty,
                                                  w.attn_proj_w, N, C, C); });
        timed(Work::Attention, [&] { attention_backward(d.dqkv, d.datt, d.datty, s.qkv, s.att, B, T, C, NH, drop); });
        timed(Work::Matmul, [&] { linear_backward(d.dln, gw.attn_w, gw.attn_b, d.dqkv, s.ln_1, w.attn_w, N, C, 3 * C); });
        timed(Work::LayerNorm, [&] { layernorm_backward(dx, gw.ln_1_w, gw.ln_1_b, d.dln, x, w.ln_1_w, s.ln_1_mean,
                                                        s.ln_1_rstd, N, C); });
    }
    // encoded = dropout(wte[idx] + wpe)
    const real* denc =
        timed(Work::Dropout, [&] { return dropout_at_site_backward(m, d.ddrop, dx, NC, 0, kEmbedding); });
    // dwte += the scatter of denc's rows (with tied weights onto lm_head's gradient, added above)
    real* dwpe = c.pos == PosEncoding::Learned ? g.wpe : nullptr;
    timed(Work::Embedding, [&] { encoder_backward(g.wte, dwpe, denc, m.inputs, B, T, C); });
}

template void gpt_build(GPT<float>&, const GPTConfig&, int, int, const GPT<float>*);
template void gpt_build(GPT<double>&, const GPTConfig&, int, int, const GPT<double>*);
template void gpt_init(GPT<float>&, uint64_t);
template void gpt_init(GPT<double>&, uint64_t);
template float* gpt_own_parameters(GPT<float>&);
template double* gpt_own_parameters(GPT<double>&);
template double gpt_forward(GPT<float>&, const int*, const int*, int, int, ForwardMode);
template double gpt_forward(GPT<double>&, const int*, const int*, int, int, ForwardMode);
template void gpt_zero_grad(GPT<float>&);
template void gpt_zero_grad(GPT<double>&);
template void gpt_backward(GPT<float>&, float);
template void gpt_backward(GPT<double>&, double);

}  // namespace hg
