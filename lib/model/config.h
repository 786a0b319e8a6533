// config.h — what a GPT is: its sizes and the architectural choices the course texts discuss.
#pragma once
#include <string>
#include <vector>

#include "lib/layers/gelu.h"  // GeluKind

namespace hg {

// Where the model has biases. Every layout keeps LayerNorm's weight; the names say the rest.
enum class BiasLayout {
    GPT2,      // GPT-2 / nanoGPT bias=True: every linear and every LayerNorm has a bias
    Course,    // the course (Step 5): no bias on Q, K, V; biases everywhere else
    Lesson14,  // Lesson 14's toy: no attention biases at all (Q, K, V, output); FFN and LN biases
    None,      // nanoGPT bias=False: no bias anywhere, LayerNorms too
};
// Where positions enter: a learned table (wpe) or the fixed sinusoidal one added to the token
// embeddings, or rotary embeddings (lib/layers/rope.h) that turn q and k inside each attention
// and add nothing to the embeddings (no wpe).
enum class PosEncoding { Learned, Sinusoidal, Rope };
// The norm before each branch and before the head. LayerNorm has a gain γ and, unless the bias
// layout is none, a bias β; RMSNorm (lib/layers/rmsnorm.h) has a learned gain and never a bias,
// whatever the bias layout.
enum class NormKind { LayerNorm, RMSNorm };
// The MLP: GELU or ReLU² between two matrices of width 4C (c_fc, c_proj), or SwiGLU with three
// matrices of width H = swiglu_hidden(C) (lib/layers/swiglu.h): the gate W1 and the up
// projection W3 stacked as c_fc [W1; W3] (2H, C), then c_proj (C, H). Biases as the layout's MLP.
enum class MlpKind { Gelu, SwiGLU, ReLU2 };
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
    NormKind norm = NormKind::LayerNorm;
    MlpKind mlp = MlpKind::Gelu;          // with Gelu, `gelu` picks the erf or tanh form
    double rope_base = 10000.0;           // RoPE's θ base (used only with PosEncoding::Rope)
    bool qk_norm = false;                 // the gain-less RMSNorm of every head of q and k before
                                          // the scores; the scale stays 1/√hs (lib/layers/qknorm.h)
    float logit_softcap = 0.0f;           // S: logits = S·tanh(z/S) before the loss; 0 = no cap
    bool init_zero_proj = false;          // after the init scheme's draw, zero the two weights
                                          // that write into the residual stream (attn.c_proj,
                                          // mlp.c_proj): each block starts as the identity

    // Which tensors exist, from the bias layout.
    bool qkv_bias() const { return bias == BiasLayout::GPT2; }
    bool attn_proj_bias() const { return bias == BiasLayout::GPT2 || bias == BiasLayout::Course; }
    bool mlp_bias() const { return bias != BiasLayout::None; }
    bool ln_bias() const { return bias != BiasLayout::None; }
    bool norm_bias() const { return norm == NormKind::LayerNorm && ln_bias(); }  // RMSNorm: never
    // The MLP's widths: c_fc's output (4C, or 2H for SwiGLU's stacked [W1; W3]) and the hidden
    // width after the activation, c_proj's input (4C, or H).
    int mlp_fc_width() const;
    int mlp_hidden() const;

    // Throws hg::Error naming the first bad value.
    void validate() const;
};

// How the passes run attention, and what the forward keeps for the backward: choices of memory
// and time, not of the model. Each setting computes the same function (flash and materialized
// attention agree within float rounding, lib/layers/flash_attention.h; recomputation repeats the
// forward's own arithmetic, so its gradients are the same bits), trains the same parameters and
// reads and writes the same checkpoints.
enum class AttentionKind {
    Flash,         // lib/layers/flash_attention.h: keeps lse (B, NH, T), one number per row
    Materialized,  // lib/layers/attention.h: keeps the probabilities att (B, NH, T, T)
};
enum class Recompute {
    None,       // keep every activation the backward reads
    Attention,  // keep attention's input (qkv) but not its output and state (atty, att or lse):
                // the backward runs each block's attention forward again, into one buffer for all
    Block,      // keep each block's input (the residual stream entering it) and its output; the
                // backward runs the block's whole forward again, into one block's buffers for all
};
struct ActivationPlan {
    AttentionKind attention = AttentionKind::Flash;
    Recompute recompute = Recompute::None;
    // Whether acts.logits outlives the forward. false: the cross-entropy writes the probabilities
    // over the logits, one (N, V) buffer instead of two, with the same loss and gradients, for a
    // caller that reads no logits. A soft-capped model keeps them whatever this says (the cap's
    // backward reads them).
    bool keep_logits = true;
};

// Named configurations, usable as --preset=NAME by every app (flags override them). The list
// and what each one is live in config.cpp; preset_names() gives the names in that order.
GPTConfig preset(const std::string& name);  // hg::Error naming the known ones for another name
std::vector<std::string> preset_names();
std::string preset_names(const std::string& separator);  // "course, shakespeare-char, ..."

// The block's choices in the flags' words, for a run's header line: "layernorm, learned positions,
// gelu (erf)" for GPT-2's block; "rmsnorm, rope positions (base 10000), swiglu, qk_norm,
// logit_softcap 30" for today's.
std::string describe_block(const GPTConfig& c);

// Enum <-> the strings used on the command line and in checkpoints. Parsing throws hg::Error.
std::string to_string(BiasLayout b);
std::string to_string(PosEncoding p);
std::string to_string(GeluKind g);
std::string to_string(InitScheme i);
std::string to_string(NormKind n);
std::string to_string(MlpKind m);
std::string to_string(AttentionKind a);
std::string to_string(Recompute r);
BiasLayout parse_bias_layout(const std::string& s);
PosEncoding parse_pos_encoding(const std::string& s);
GeluKind parse_gelu(const std::string& s);
InitScheme parse_init(const std::string& s);
NormKind parse_norm(const std::string& s);
MlpKind parse_mlp(const std::string& s);
AttentionKind parse_attention(const std::string& s);
Recompute parse_recompute(const std::string& s);

}  // namespace hg
