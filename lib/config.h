// config.h — what a GPT is: its sizes and the architectural choices the course texts discuss.
#pragma once
#include <string>
#include <vector>

namespace hg {

// Where the model has biases. Every layout keeps LayerNorm's weight; the names say the rest.
enum class BiasLayout {
    GPT2,      // GPT-2 / nanoGPT bias=True: every linear and every LayerNorm has a bias
    Course,    // the course (Step 5): no bias on Q, K, V; biases everywhere else
    Lesson14,  // Lesson 14's toy: no attention biases at all (Q, K, V, output); FFN and LN biases
    None,      // nanoGPT bias=False: no bias anywhere, LayerNorms too
};
enum class PosEncoding { Learned, Sinusoidal };
enum class GeluKind { Erf, Tanh };  // GELU's two forms (lib/layers/gelu.h)
enum class InitScheme {
    GPT2,      // N(0, 0.02²); residual output projections N(0, 0.02²/2L); biases 0; LN γ=1, β=0
    PyTorch,   // PyTorch's defaults: nn.Linear U(±1/√in) weights and biases, nn.Embedding N(0, 1)
    Lesson14,  // Lesson 14's own: embeddings N(0, 0.1²); Q, K, V, attention output and LM head
               // N(0, 1/C); FFN He N(0, 2/fan_in); biases 0; LayerNorm γ = 1, β = 0
    Lesson14Scaled,  // the same draw, with both residual projections (attn.c_proj, mlp.c_proj)
                     // scaled by 1/√(2L): the lesson's "branch outputs scaled by 1/√(2N)"
};

struct GPTConfig {
    int vocab_size = 65;    // V
    int block_size = 64;    // the longest context; rows of the position table
    int n_layer = 4;        // L
    int n_head = 4;         // NH
    int n_embd = 128;       // C (d in the course texts)
    float dropout = 0.0f;   // in [0, 1)
    BiasLayout bias = BiasLayout::Course;
    bool tie_weights = false;  // lm_head shares the token embedding (GPT-2)
    PosEncoding pos = PosEncoding::Learned;
    GeluKind gelu = GeluKind::Erf;
    InitScheme init = InitScheme::GPT2;

    // Which tensors exist, from the bias layout.
    bool qkv_bias() const { return bias == BiasLayout::GPT2; }
    bool attn_proj_bias() const { return bias == BiasLayout::GPT2 || bias == BiasLayout::Course; }
    bool mlp_bias() const { return bias != BiasLayout::None; }
    bool ln_bias() const { return bias != BiasLayout::None; }

    // Throws hg::Error naming the first bad value.
    void validate() const;
};

// Named configurations, usable as --preset=NAME by every app (flags override them). The list
// and what each one is live in config.cpp; preset_names() gives the names in that order.
GPTConfig preset(const std::string& name);  // hg::Error naming the known ones for another name
std::vector<std::string> preset_names();
std::string preset_names(const std::string& separator);  // "course, shakespeare-char, ..."

// Enum <-> the strings used on the command line and in checkpoints. Parsing throws hg::Error.
std::string to_string(BiasLayout b);
std::string to_string(PosEncoding p);
std::string to_string(GeluKind g);
std::string to_string(InitScheme i);
BiasLayout parse_bias_layout(const std::string& s);
PosEncoding parse_pos_encoding(const std::string& s);
GeluKind parse_gelu(const std::string& s);
InitScheme parse_init(const std::string& s);

}  // namespace hg
