// count.cpp — parameter and FLOP counting from the tensor table (see count.h).
#include "lib/count.h"

namespace hg {

ParameterBreakdown count_parameters(const GPTConfig& config) {
    ParameterBreakdown p;
    for (const TensorSpec& t : parameter_table(config)) {
        const size_t n = t.shape.numel();
        switch (t.component) {
            case Component::Embedding: p.embedding += n; break;
            case Component::Attention: p.attention += n; break;
            case Component::MLP: p.mlp += n; break;
            case Component::BlockLayerNorm: p.block_layernorm += n; break;
            case Component::FinalLayerNorm: p.final_layernorm += n; break;
            case Component::LMHead: p.lm_head += n; break;
        }
        p.total += n;
    }
    const size_t C = config.n_embd;
    p.rule_of_thumb = 12 * size_t(config.n_layer) * C * C;
    return p;
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
    std::vector<StageShape> s;
    s.push_back({"token ids", Shape{b, t}});
    s.push_back({"token + position embeddings", Shape{b, t, C}});
    for (int l = 0; l < config.n_layer; l++) {
        const std::string blk = "block " + std::to_string(l);
        s.push_back({blk + " ln_1", Shape{b, t, C}});
        s.push_back({blk + " qkv", Shape{b, t, 3 * C}});
        s.push_back({blk + " attention probs", Shape{b, size_t(config.n_head), t, t}});
        s.push_back({blk + " attention out", Shape{b, t, C}});
        s.push_back({blk + " mlp hidden", Shape{b, t, 4 * C}});
        s.push_back({blk + " output", Shape{b, t, C}});
    }
    s.push_back({"final LayerNorm", Shape{b, t, C}});
    s.push_back({"logits", Shape{b, t, size_t(config.vocab_size)}});
    return s;
}

}  // namespace hg
