// gpt.cpp — the tensor table, the arenas and the initialisation (see gpt.h); the forward and
// backward passes are in gpt_passes.cpp.
#include "lib/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/core/parallel.h"
#include "lib/core/rng.h"
#include "lib/kernels/normal_kernels.h"
#include "lib/layers/attention.h"
#include "lib/layers/flash_attention.h"
#include "lib/layers/encoder.h"
#include "lib/layers/rope.h"
#include "lib/model/memory_check.h"

namespace hg {

// ----------------------------------------------------------------------------------------------
// The tensor table. walk_parameters lists every parameter once, in checkpoint order, naming
// the field of ParameterTensors it lives in and what the tensor is (role, fan-in). The table,
// the arena views and the initialisation are all made from this one walk, so sizes, views,
// names, decay flags and init rules cannot drift apart.

// A row of the table, its offset left for the caller. Weight decay goes with the role: the 2-D
// tensors (weights and embeddings) decay; biases and norm parameters do not.
static TensorSpec spec(std::string name, Shape shape, Component component, Role role, size_t fan_in,
                       bool residual = false) {
    const bool decays = role == Role::Weight || role == Role::Embedding;
    return TensorSpec{std::move(name), shape, decays, component, role, fan_in, residual, 0};
}

template <typename real, typename Visit>
static void walk_parameters(const GPTConfig& c, ParameterTensors<real>& p, Visit&& visit) {
    const size_t V = c.vocab_size, C = c.n_embd, F = c.mlp_fc_width(), M = c.mlp_hidden();
    using K = Component;
    // out = inp · Wᵀ + b, W (out, in): both tensors have fan-in `in`.
    auto linear = [&](const std::string& name, K k, size_t out, size_t in, bool has_bias, bool residual,
                      real*& w, real*& b) {
        visit(spec(name + ".weight", Shape{out, in}, k, Role::Weight, in, residual), w);
        if (has_bias) visit(spec(name + ".bias", Shape{out}, k, Role::Bias, in, residual), b);
    };
    // LayerNorm's γ and β, or RMSNorm's gain alone: the gain keeps LayerNorm's name.
    auto norm = [&](const std::string& name, K k, real*& w, real*& b) {
        visit(spec(name + ".weight", Shape{C}, k, Role::LayerNormWeight, 1), w);
        if (c.norm_bias()) visit(spec(name + ".bias", Shape{C}, k, Role::LayerNormBias, 1), b);
    };
    visit(spec("transformer.wte.weight", Shape{V, C}, K::Embedding, Role::Embedding, 1), p.wte);
    if (c.pos == PosEncoding::Learned)
        visit(spec("transformer.wpe.weight", Shape{size_t(c.block_size), C}, K::Embedding, Role::Embedding, 1), p.wpe);
    p.h.assign(c.n_layer, BlockParameters<real>{});
    for (int l = 0; l < c.n_layer; l++) {
        BlockParameters<real>& b = p.h[l];
        const std::string pre = "transformer.h." + std::to_string(l) + ".";
        norm(pre + "ln_1", K::BlockLayerNorm, b.ln_1_w, b.ln_1_b);
        linear(pre + "attn.c_attn", K::Attention, 3 * C, C, c.qkv_bias(), false, b.attn_w, b.attn_b);
        linear(pre + "attn.c_proj", K::Attention, C, C, c.attn_proj_bias(), true, b.attn_proj_w, b.attn_proj_b);
        norm(pre + "ln_2", K::BlockLayerNorm, b.ln_2_w, b.ln_2_b);
        linear(pre + "mlp.c_fc", K::MLP, F, C, c.mlp_bias(), false, b.fc_w, b.fc_b);  // SwiGLU: [W1; W3]
        linear(pre + "mlp.c_proj", K::MLP, C, M, c.mlp_bias(), true, b.mlp_proj_w, b.mlp_proj_b);
    }
    norm("transformer.ln_f", K::FinalLayerNorm, p.ln_f_w, p.ln_f_b);
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

// The activations and the scratch are sized here, from the config and the plan, and nowhere else.
// Under recomputation the blocks after the first share the first block's buffers for what is
// recomputed (gpt.h, BlockActivations).
template <typename real>
static size_t bind_activations(const GPTConfig& c, int B, int T, ActivationPlan plan, real* base,
                               ActivationTensors<real>& a) {
    Carver<real> arena{base};
    const size_t N = size_t(B) * T, C = c.n_embd, V = c.vocab_size, NH = c.n_head;
    const size_t F = c.mlp_fc_width(), M = c.mlp_hidden(), half_hs = C / NH / 2;
    const bool layernorm = c.norm == NormKind::LayerNorm, rope = c.pos == PosEncoding::Rope;
    const bool flash = plan.attention == AttentionKind::Flash;
    const bool block = plan.recompute == Recompute::Block, attention = plan.recompute != Recompute::None;
    auto take_if = [&](bool wanted, size_t n) { return wanted ? arena.take(n) : nullptr; };
    a.pos_table = take_if(c.pos == PosEncoding::Sinusoidal, size_t(c.block_size) * C);
    a.rope_cos = take_if(rope, c.block_size * half_hs), a.rope_sin = take_if(rope, c.block_size * half_hs);
    a.encoded = arena.take(N * C);
    a.h.assign(c.n_layer, BlockActivations<real>{});
    for (size_t l = 0; l < a.h.size(); l++) {
        BlockActivations<real>& s = a.h[l];
        const BlockActivations<real>& first = a.h[0];
        // block l's own buffer of n numbers, or the first block's when `recomputed` (null unless wanted)
        auto take = [&](bool recomputed, real* firsts, size_t n, bool wanted = true) {
            return !wanted ? nullptr : l > 0 && recomputed ? firsts : arena.take(n);
        };
        s.ln_1 = take(block, first.ln_1, N * C), s.ln_1_mean = take(block, first.ln_1_mean, N, layernorm);
        s.ln_1_rstd = take(block, first.ln_1_rstd, N);
        s.qkv = take(block, first.qkv, N * 3 * C);
        s.qk_rstd = take(block, first.qk_rstd, N * 2 * NH, c.qk_norm);
        s.att = take(attention, first.att, size_t(B) * NH * T * T, !flash);
        s.lse = take(attention, first.lse, size_t(B) * NH * T, flash);
        s.atty = take(attention, first.atty, N * C), s.res_2 = take(block, first.res_2, N * C);
        s.ln_2 = take(block, first.ln_2, N * C), s.ln_2_mean = take(block, first.ln_2_mean, N, layernorm);
        s.ln_2_rstd = take(block, first.ln_2_rstd, N);
        s.fc = take(block, first.fc, N * F), s.fc_act = take(block, first.fc_act, N * M);
        s.res_3 = arena.take(N * C);
    }
    a.ln_f = arena.take(N * C), a.ln_f_mean = take_if(layernorm, N), a.ln_f_rstd = arena.take(N);
    const bool keep_logits = plan.keep_logits || c.logit_softcap > 0.0f;
    a.logits = arena.take(N * V), a.probs = keep_logits ? arena.take(N * V) : a.logits, a.losses = arena.take(N);
    return arena.used;
}

// Flash attention's working space: a slice per thread the model may run on (flash_attention.h),
// large enough for either dtype. The twins (double) need none.
template <typename real>
static size_t flash_scratch_numbers(const GPTConfig& c, int T) {
    if (!std::is_same_v<real, float>) return 0;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const size_t slice = std::max(flash_attention_scratch(T, c.n_embd, c.n_head),
                                  flash_attention_bf16_scratch(T, c.n_embd, c.n_head));
    return size_t(threads) * slice;
}

template <typename real>
static size_t bind_scratch(const GPTConfig& c, int B, int T, ActivationPlan plan, real* base, Scratch<real>& d) {
    Carver<real> arena{base};
    const size_t N = size_t(B) * T, C = c.n_embd, NH = c.n_head;
    // dlogits has no buffer of its own: the cross-entropy's backward writes it over acts.probs,
    // which nothing reads after (gpt_build points it there).
    d.dx = arena.take(N * C), d.dln_f = arena.take(N * C), d.dln_2 = arena.take(N * C), d.dln_1 = arena.take(N * C);
    d.dqkv = arena.take(N * 3 * C), d.datty = arena.take(N * C);
    d.ddrop = arena.take(N * C);
    d.dfc = arena.take(N * c.mlp_fc_width()), d.dfc_act = arena.take(N * c.mlp_hidden());
    d.attention_numbers = plan.attention == AttentionKind::Flash ? flash_scratch_numbers<real>(c, T)
                                                                 : size_t(B) * NH * T * T;
    d.attention = arena.take(d.attention_numbers);
    return arena.used;
}

template <typename real>
void gpt_build(GPT<real>& m, const GPTConfig& config, int max_B, int max_T, const GPT<real>* share_params_of,
               ActivationPlan plan) {
    config.validate();
    check(max_B >= 1, "batch_size must be positive (got {})", max_B);
    check(max_T >= 1 && max_T <= config.block_size,
          "sequence length {} must be in [1, block_size = {}]", max_T, config.block_size);
    m.config = config;
    m.max_B = max_B, m.max_T = max_T;
    m.plan = share_params_of ? share_params_of->plan : plan;
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
    m.acts_memory.allocate(bind_activations<real>(config, max_B, max_T, m.plan, nullptr, m.acts));
    bind_activations(config, max_B, max_T, m.plan, m.acts_memory.data(), m.acts);
    m.scratch_memory.allocate(bind_scratch<real>(config, max_B, max_T, m.plan, nullptr, m.scratch));
    bind_scratch(config, max_B, max_T, m.plan, m.scratch_memory.data(), m.scratch);
    m.scratch.dlogits = m.acts.probs;
    m.tokens_memory.allocate(2 * size_t(max_B) * max_T);
    m.inputs = m.tokens_memory.data();
    m.targets = m.inputs + size_t(max_B) * max_T;
    if (config.pos == PosEncoding::Sinusoidal)
        sinusoidal_table(m.acts.pos_table, config.block_size, config.n_embd);
    if (config.pos == PosEncoding::Rope)
        rope_table(m.acts.rope_cos, m.acts.rope_sin, config.block_size, config.n_embd / config.n_head,
                   config.rope_base);
}

// The bf16 copies of the linear layers' inputs, the backward's rounded dout and materialized
// attention's working space, carved (or, with base == nullptr, only counted) for batches up to
// (B, T). The copies of what the plan recomputes are shared as bind_activations shares their floats.
static size_t bind_bf16_activations(const GPTConfig& c, int B, int T, ActivationPlan plan, bf16* base,
                                    Bf16Copies& b) {
    Carver<bf16> arena{base};
    const size_t N = size_t(B) * T, C = c.n_embd, M = c.mlp_hidden();
    const size_t widest = std::max({size_t(c.vocab_size), 3 * C, size_t(c.mlp_fc_width()), C});
    const bool block = plan.recompute == Recompute::Block, attention = plan.recompute != Recompute::None;
    b.h.assign(c.n_layer, Bf16Block{});
    for (size_t l = 0; l < b.h.size(); l++) {
        auto take = [&](bool recomputed, bf16* firsts, size_t n) {
            return l > 0 && recomputed ? firsts : arena.take(n);
        };
        const Bf16Block& first = b.h[0];
        b.h[l] = {take(block, first.ln_1, N * C), take(attention, first.atty, N * C), take(block, first.ln_2, N * C),
                  take(block, first.fc_act, N * M)};
    }
    b.ln_f = arena.take(N * C), b.dout = arena.take(N * widest);
    const bool materialized = plan.attention == AttentionKind::Materialized;
    b.attention = materialized ? arena.take(attention_bf16_scratch(B, T, int(C), c.n_head)) : nullptr;
    return arena.used;
}

size_t gpt_bf16_numbers(const GPTConfig& config, int max_B, int max_T, ActivationPlan plan) {
    Bf16Copies unused;
    return bind_bf16_activations(config, max_B, max_T, plan, nullptr, unused);
}

void gpt_use_bf16(GPT<float>& m, const GPT<float>* share_params_of) {
    Bf16Copies& b = m.mixed;
    b.params = m.params.wte;  // the table's first tensor: offset 0 of the parameter arena
    if (share_params_of) {
        check(share_params_of->mixed.on(), "a replica's model must use bf16 before the replica does");
        b.weights = share_params_of->mixed.weights;
    } else {
        b.weights_memory.allocate(m.num_parameters);
        b.weights = b.weights_memory.data();
    }
    b.acts_memory.allocate(bind_bf16_activations(m.config, m.max_B, m.max_T, m.plan, nullptr, b));
    bind_bf16_activations(m.config, m.max_B, m.max_T, m.plan, b.acts_memory.data(), b);
    if (!share_params_of) gpt_round_weights(m);
}

void gpt_round_weights(GPT<float>& m) {
    if (m.mixed.on() && m.params_memory.size() == m.num_parameters)
        bf16_round(m.mixed.weights, m.params_memory.data(), m.num_parameters);
}

// Declared in memory_check.h, which compares it with the memory there is.
size_t gpt_activation_floats(const GPTConfig& config, int max_B, int max_T, ActivationPlan plan) {
    ActivationTensors<float> acts;
    Scratch<float> scratch;
    return bind_activations<float>(config, max_B, max_T, plan, nullptr, acts) +
           bind_scratch<float>(config, max_B, max_T, plan, nullptr, scratch);
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
// RMSNorm's gain is drawn as LayerNorm's γ (1); SwiGLU's three matrices as c_fc and c_proj
// (each by its own fan-in under lesson14).
// init_zero_proj, on top of any scheme: attn.c_proj and mlp.c_proj, weights and biases, are 0,
// so every block starts as the identity on the residual stream and the first steps train the
// projections alone (the gradient into the other weights of a branch passes through its zero
// projection). Constants and zeros draw nothing from the generator.

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
        // Value i of the tensor takes draws k·i … k·i + k − 1 of the stream (k = 2 for a normal,
        // 1 for a uniform), so pieces of the tensor are filled side by side, each from a copy of
        // the stream moved to its first draw: the values one pass would give, on any threads.
        auto draw = [&](uint64_t k, auto fill) {
            for_pieces(n, size_t(1) << 16, 16, [&](size_t i0, size_t len) {
                Rng r = rng;
                r.discard(k * i0);
                fill(w + i0, len, r);
            });
            rng.discard(k * n);
        };
        // A float model's normals come from the SIMD kernel (Rng::normal's values, with the
        // logarithm and cosine on vectors: normal_kernels.h); a double model's from Rng::normal.
        auto normal = [&](double std) {
            draw(2, [&](real* out, size_t len, Rng& r) {
                if constexpr (std::is_same_v<real, float>)
                    normal_kernel(out, len, r, std);
                else
                    for (size_t i = 0; i < len; i++) out[i] = std * r.normal();
            });
        };
        auto uniform = [&](double bound) {  // U(-bound, bound)
            draw(1, [&](real* out, size_t len, Rng& r) {
                for (size_t i = 0; i < len; i++) out[i] = real(bound * (2 * r.uniform() - 1));
            });
        };
        const double pytorch_bound = 1.0 / std::sqrt(double(t.fan_in));
        if (c.init_zero_proj && t.residual) {
            constant(0);
            continue;
        }
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

template void gpt_build(GPT<float>&, const GPTConfig&, int, int, const GPT<float>*, ActivationPlan);
template void gpt_build(GPT<double>&, const GPTConfig&, int, int, const GPT<double>*, ActivationPlan);
template void gpt_init(GPT<float>&, uint64_t);
template void gpt_init(GPT<double>&, uint64_t);
template float* gpt_own_parameters(GPT<float>&);
template double* gpt_own_parameters(GPT<double>&);

}  // namespace hg
