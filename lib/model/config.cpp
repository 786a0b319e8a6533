// config.cpp — presets, validation and the names of the choices (see config.h).
#include "lib/model/config.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "lib/core/errors.h"
#include "lib/core/named.h"
#include "lib/layers/swiglu.h"

namespace hg {

void GPTConfig::validate() const {
    check(vocab_size >= 2, "vocab_size must be at least 2 (got {})", vocab_size);
    check(block_size >= 1, "block_size must be positive (got {})", block_size);
    check(n_layer >= 1, "n_layer must be positive (got {})", n_layer);
    check(n_head >= 1, "n_head must be positive (got {})", n_head);
    check(n_embd >= 1, "n_embd must be positive (got {})", n_embd);
    check(n_embd % n_head == 0, "n_embd ({}) must be divisible by n_head ({})", n_embd, n_head);
    check(std::isfinite(dropout) && dropout >= 0.0f && dropout < 1.0f,
          "dropout must be in [0, 1) (got {})", dropout);
    // Keep every size product well inside int (the layers index with int sizes).
    check(double(vocab_size) * n_embd < 2e9 && double(n_embd) * 4 * n_embd < 2e9,
          "model too large: vocab_size {} x n_embd {}", vocab_size, n_embd);
    check(double(block_size) * n_embd < 2e9, "model too large: block_size {} x n_embd {}", block_size, n_embd);
    // The tensor table lists a dozen tensors per layer: a million layers is a typo, not a model.
    check(n_layer <= 100000, "n_layer must be at most 100000 (got {})", n_layer);
    check(pos != PosEncoding::Rope || (n_embd / n_head) % 2 == 0,
          "rope rotates pairs of numbers in each head: the head size n_embd / n_head = {} must be even",
          n_embd / n_head);
    check(std::isfinite(rope_base) && rope_base > 1, "rope_base must be a number > 1 (got {})", rope_base);
    check(std::isfinite(logit_softcap) && logit_softcap >= 0.0f,
          "logit_softcap must be a number >= 0, 0 for no cap (got {})", logit_softcap);
}

int GPTConfig::mlp_fc_width() const { return mlp == MlpKind::SwiGLU ? 2 * swiglu_hidden(n_embd) : 4 * n_embd; }
int GPTConfig::mlp_hidden() const { return mlp == MlpKind::SwiGLU ? swiglu_hidden(n_embd) : 4 * n_embd; }

// The presets, in the order preset_names() gives them: each is GPTConfig's defaults (the
// course model) with what differs changed.
static const std::vector<std::pair<std::string, GPTConfig>>& presets() {
    static const std::vector<std::pair<std::string, GPTConfig>> table = [] {
        std::vector<std::pair<std::string, GPTConfig>> t;
        // V=65, block 64, L=4, H=4, C=128, untied, learned positions. Bias layout Course (no
        // Q/K/V bias, biases everywhere else): the course's own model, so its numbers
        // (docs/course-numbers.md) are this preset's; nanoGPT's bias=False is --bias=False.
        t.push_back({"course", GPTConfig{}});
        GPTConfig c;  // nanoGPT's baby GPT (config/train_shakespeare_char.py), which keeps
        c.block_size = 256, c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.dropout = 0.2f;
        c.bias = BiasLayout::None, c.tie_weights = true;  // train.py's default bias=False
        t.push_back({"shakespeare-char", c});
        c = GPTConfig{};  // the ten-minute recipes' models (tools/speedrun_search.py): untied, today's
        c.block_size = 128, c.dropout = 0.0f;  // block (docs/speedrun.md); the float one L4 H4 C128
        c.norm = NormKind::RMSNorm, c.pos = PosEncoding::Rope, c.mlp = MlpKind::SwiGLU;
        c.qk_norm = true, c.logit_softcap = 30.0f;
        GPTConfig wide = c;  // bf16's faster step affords a wider model, and its more passes
        wide.n_embd = 192, wide.n_head = 6, wide.dropout = 0.05f;  // over the text want dropout
        t.push_back({"speedrun", wide});
        t.push_back({"speedrun-float32", c});
        c = GPTConfig{};  // the recipe before it, kept reproducible: GPT-2's block (and AdamW)
        c.block_size = 128, c.dropout = 0.0f, c.gelu = GeluKind::Tanh;
        t.push_back({"speedrun-classic", c});
        c = GPTConfig{};  // GELU erf, as nanoGPT
        c.vocab_size = 50257, c.block_size = 1024, c.n_layer = 12, c.n_head = 12, c.n_embd = 768;
        c.bias = BiasLayout::GPT2, c.tie_weights = true;
        t.push_back({"gpt2", c});
        c.n_layer = 24, c.n_head = 16, c.n_embd = 1024;
        t.push_back({"gpt2-medium", c});
        // Fine-tuning OpenAI's weights on a CPU (nanoGPT's finetune_shakespeare.py): GPT-2 small as
        // OpenAI trained it (tanh GELU), the context cut to 256. With train --init_from=PATH the
        // checkpoint gives the model and this preset only the block_size and dropout.
        c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.block_size = 256, c.gelu = GeluKind::Tanh;
        t.push_back({"finetune-shakespeare", c});
        c = GPTConfig{};  // Lesson 14's toy GPT: V=50, T=8, d=64, H=4, N=4
        c.vocab_size = 50, c.block_size = 8, c.n_layer = 4, c.n_head = 4, c.n_embd = 64;
        c.bias = BiasLayout::Lesson14, c.pos = PosEncoding::Sinusoidal, c.init = InitScheme::Lesson14;
        t.push_back({"lesson14", c});
        return t;
    }();
    return table;
}

GPTConfig preset(const std::string& name) {
    for (const auto& [known, config] : presets())
        if (known == name) return config;
    fail("unknown preset '{}' (known: {})", name, preset_names(", "));
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& entry : presets()) names.push_back(entry.first);
    return names;
}

std::string preset_names(const std::string& separator) {
    std::string names;
    for (const auto& entry : presets()) names += (names.empty() ? "" : separator) + entry.first;
    return names;
}

namespace {

// Each enum's names on the command line and in checkpoints (lib/core/named.h).
constexpr Named<BiasLayout> kBiasLayouts[] = {
    {BiasLayout::GPT2, "gpt2"}, {BiasLayout::Course, "course"}, {BiasLayout::Lesson14, "lesson14"},
    {BiasLayout::None, "none"}};
constexpr Named<PosEncoding> kPosEncodings[] = {
    {PosEncoding::Learned, "learned"}, {PosEncoding::Sinusoidal, "sinusoidal"}, {PosEncoding::Rope, "rope"}};
constexpr Named<GeluKind> kGeluKinds[] = {{GeluKind::Erf, "erf"}, {GeluKind::Tanh, "tanh"}};
constexpr Named<NormKind> kNormKinds[] = {{NormKind::LayerNorm, "layernorm"}, {NormKind::RMSNorm, "rmsnorm"}};
constexpr Named<MlpKind> kMlpKinds[] = {
    {MlpKind::Gelu, "gelu"}, {MlpKind::SwiGLU, "swiglu"}, {MlpKind::ReLU2, "relu2"}};
constexpr Named<InitScheme> kInitSchemes[] = {
    {InitScheme::GPT2, "gpt2"}, {InitScheme::PyTorch, "pytorch"}, {InitScheme::Lesson14, "lesson14"},
    {InitScheme::Lesson14Scaled, "lesson14-scaled"}};
constexpr Named<AttentionKind> kAttentionKinds[] = {
    {AttentionKind::Flash, "flash"}, {AttentionKind::Materialized, "materialized"}};
constexpr Named<Recompute> kRecomputes[] = {
    {Recompute::None, "none"}, {Recompute::Attention, "attention"}, {Recompute::Block, "block"}};

}  // namespace

std::string to_string(BiasLayout b) { return name_of(kBiasLayouts, b); }
std::string to_string(PosEncoding p) { return name_of(kPosEncodings, p); }
std::string to_string(GeluKind g) { return name_of(kGeluKinds, g); }
std::string to_string(NormKind n) { return name_of(kNormKinds, n); }
std::string to_string(MlpKind m) { return name_of(kMlpKinds, m); }
std::string to_string(InitScheme i) { return name_of(kInitSchemes, i); }
std::string to_string(AttentionKind a) { return name_of(kAttentionKinds, a); }
std::string to_string(Recompute r) { return name_of(kRecomputes, r); }

BiasLayout parse_bias_layout(const std::string& s) { return value_named(kBiasLayouts, s, "bias layout"); }
PosEncoding parse_pos_encoding(const std::string& s) { return value_named(kPosEncodings, s, "position encoding"); }
GeluKind parse_gelu(const std::string& s) { return value_named(kGeluKinds, s, "gelu"); }
NormKind parse_norm(const std::string& s) { return value_named(kNormKinds, s, "norm"); }
MlpKind parse_mlp(const std::string& s) { return value_named(kMlpKinds, s, "mlp"); }
InitScheme parse_init(const std::string& s) { return value_named(kInitSchemes, s, "init scheme"); }
AttentionKind parse_attention(const std::string& s) { return value_named(kAttentionKinds, s, "attention"); }
Recompute parse_recompute(const std::string& s) { return value_named(kRecomputes, s, "recompute"); }

std::string describe_block(const GPTConfig& c) {
    std::string s = to_string(c.norm) + ", " + to_string(c.pos) + " positions";
    if (c.pos == PosEncoding::Rope) s += fmt::format(" (base {})", c.rope_base);
    s += ", " + to_string(c.mlp);
    if (c.mlp == MlpKind::Gelu) s += " (" + to_string(c.gelu) + ")";
    if (c.qk_norm) s += ", qk_norm";
    if (c.logit_softcap > 0) s += fmt::format(", logit_softcap {}", c.logit_softcap);
    if (c.init_zero_proj) s += ", init_zero_proj";
    return s;
}

}  // namespace hg
