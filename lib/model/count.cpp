// count.cpp — parameter and FLOP counting from the tensor table (see count.h).
#include "lib/model/count.h"

#include <fmt/format.h>

namespace hg {

ParameterBreakdown count_parameters(const GPTConfig& config) {
    ParameterBreakdown p;
    for (const TensorSpec& t : parameter_table(config)) {
        const size_t n = t.shape.numel();
        const bool is_bias = t.shape.ndim == 1;
        switch (t.component) {
            case Component::Embedding:
                p.embedding += n;
                (t.name == "transformer.wpe.weight" ? p.position_embedding : p.token_embedding) += n;
                break;
            case Component::Attention:
                p.attention += n;
                if (is_bias) p.attention_biases += n;
                break;
            case Component::MLP: p.mlp += n; break;
            case Component::BlockLayerNorm: p.block_layernorm += n; break;
            case Component::FinalLayerNorm: p.final_layernorm += n; break;
            case Component::LMHead: p.lm_head += n; break;
        }
        p.total += n;
    }
    const size_t C = config.n_embd, mlp_matrices = config.mlp == MlpKind::SwiGLU ? 3 * C * config.mlp_hidden()
                                                                                 : 8 * C * C;
    p.rule_of_thumb = size_t(config.n_layer) * (4 * C * C + mlp_matrices);
    return p;
}

GPTConfig lesson14_convention(GPTConfig config) {
    if (config.ln_bias()) config.bias = BiasLayout::Lesson14;
    return config;
}

std::vector<std::string> lesson14_parameter_table(const GPTConfig& config) {
    const ParameterBreakdown p = count_parameters(config);
    const int L = config.n_layer;
    // The lesson prints each row as print(label, n): the label, one space, the number.
    auto row = [](const std::string& label, auto n) { return fmt::format("{} {}", label, n); };
    return {
        "Component                | Params",
        "-------------------------+--------",
        row("Token embedding          ", p.token_embedding),
        row(config.pos == PosEncoding::Sinusoidal ? "Positional (sinusoidal)  "
            : config.pos == PosEncoding::Rope     ? "Positional (rope)        "
                                                  : "Positional (learned)     ",
            p.position_embedding),
        row(fmt::format("Per-block (× {} )          ", L), p.blocks() / size_t(L)),
        row("All blocks               ", p.blocks()),
        row("Final LN                 ", p.final_layernorm),
        row(config.tie_weights ? "LM head (tied to E)      " : "LM head                  ", p.lm_head),
        "-------------------------+--------",
        row("TOTAL                    ", p.total),
        row("f32 size (MB):           ", double(p.total) * 4 / 1e6),
    };
}

ComputeBudget chinchilla_budget(size_t parameters) {
    ComputeBudget b;
    b.parameters = double(parameters);
    b.tokens = 20.0 * b.parameters;
    b.flops = 6.0 * b.parameters * b.tokens;
    return b;
}

FlopCount count_flops(const GPTConfig& config, int T) {
    const ParameterBreakdown p = count_parameters(config);
    const double C = config.n_embd, V = config.vocab_size, L = config.n_layer;
    FlopCount f;
    f.forward_weights = 2.0 * (double(p.blocks()) + C * V);
    f.attention = 4.0 * T * C * L;
    f.forward = f.forward_weights + f.attention;
    f.training = 3.0 * f.forward;
    f.training_weights = 3.0 * f.forward_weights;
    f.crossover_T = 4 * config.n_embd;
    return f;
}

std::vector<StageShape> shape_table(const GPTConfig& config, int B, int T) {
    config.validate();
    const size_t b = B, t = T, C = config.n_embd;
    const bool rms = config.norm == NormKind::RMSNorm, rope = config.pos == PosEncoding::Rope;
    const bool swiglu = config.mlp == MlpKind::SwiGLU;
    const std::string rms_tag = rms ? " (RMSNorm)" : "";
    std::vector<StageShape> s;
    s.push_back({"token ids", Shape{b, t}});
    s.push_back({rope ? "token embeddings (rope: no wpe)" : "token + position embeddings", Shape{b, t, C}});
    for (int l = 0; l < config.n_layer; l++) {
        const std::string blk = "block " + std::to_string(l);
        s.push_back({blk + " ln_1" + rms_tag, Shape{b, t, C}});
        std::string qkv = blk + " qkv";
        if (rope || config.qk_norm)
            qkv += std::string(" (") + (rope ? "rope" : "") + (rope && config.qk_norm ? ", " : "") +
                   (config.qk_norm ? "qk_norm" : "") + ")";
        s.push_back({qkv, Shape{b, t, 3 * C}});
        s.push_back({blk + " attention probs", Shape{b, size_t(config.n_head), t, t}});
        s.push_back({blk + " attention out", Shape{b, t, C}});
        if (swiglu) {
            s.push_back({blk + " mlp gate | up", Shape{b, t, size_t(config.mlp_fc_width())}});
            s.push_back({blk + " mlp hidden (swiglu)", Shape{b, t, size_t(config.mlp_hidden())}});
        } else {
            s.push_back({blk + " mlp hidden" + (config.mlp == MlpKind::ReLU2 ? " (relu2)" : ""),
                         Shape{b, t, 4 * C}});
        }
        s.push_back({blk + " output", Shape{b, t, C}});
    }
    s.push_back({rms ? "final RMSNorm" : "final LayerNorm", Shape{b, t, C}});
    s.push_back({config.logit_softcap > 0 ? "logits (soft-capped)" : "logits", Shape{b, t, size_t(config.vocab_size)}});
    return s;
}

}  // namespace hg
