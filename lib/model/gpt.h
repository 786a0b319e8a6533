// gpt.h — the GPT: its tensor table, its memory, and its forward and backward passes.
//
//   X⁰ = wte[idx] + wpe                         encoder        (B, T, C); no wpe with rope
//   for each block ℓ:                            pre-norm, GPT-2 style
//     q, k, v = c_attn(norm_1(Xˡ));  q, k = rope(q, k);  q, k = qk_norm(q, k)     (each optional)
//     Xˡ += attn_proj(attention(q, k, v))
//     Xˡ += mlp_proj(act(c_fc(norm_2(Xˡ))))     act: GELU, ReLU², or SwiGLU on [gate | up]
//   logits = softcap(norm_f(Xᴸ) · lm_headᵀ)     (B, T, V); softcap optional
//   loss = mean cross-entropy(logits, targets)
// norm is LayerNorm or RMSNorm (GPTConfig::norm). The GPT-2 block is every choice at its
// default: LayerNorm, learned positions, GELU, no QK-norm, no cap.
//
// gpt_backward is gpt_forward read in reverse, one layer's backward per forward line
// (lib/model/gpt_passes.cpp). All of it is a template over the number type: float runs the fast
// paths, double the scalar twins (x_twin in each layer's header), which the whole-model gradient
// check uses; lib/model/gpt_choices.h picks which, and the bf16 products.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/profile.h"
#include "lib/core/tensor.h"
#include "lib/kernels/bf16.h"
#include "lib/model/config.h"

namespace hg {

// The parts of the model the course's parameter table counts separately.
enum class Component { Embedding, Attention, MLP, BlockLayerNorm, FinalLayerNorm, LMHead };

// What a parameter tensor is to its layer: what gpt_init draws for it, and whether it decays.
enum class Role {
    Embedding,        // wte, wpe: rows looked up by token id or position
    Weight,           // a linear layer's matrix W (out, in): out = inp · Wᵀ + b
    Bias,             // a linear layer's b (out)
    LayerNormWeight,  // γ (C): LayerNorm's or RMSNorm's gain
    LayerNormBias,    // β (C): LayerNorm's only
};

// One row of the tensor table. The table is the single list of the model's parameters:
// it gives the arena's size and each tensor's view into it, the checkpoint names (nanoGPT's
// state_dict keys), which tensors AdamW decays, how gpt_init draws each, and the labels tests
// print. The choices nanoGPT does not have keep its name for the tensor in the same role:
// RMSNorm's gain is ln_1.weight / ln_2.weight / ln_f.weight (with no .bias), SwiGLU's stacked
// gate and up projection [W1; W3] is mlp.c_fc.weight (2H, C) and its down projection
// mlp.c_proj.weight (C, H). Rotary positions have no tensor (no wpe); QK-norm and the soft cap
// have no parameters.
struct TensorSpec {
    std::string name;     // "transformer.h.0.attn.c_attn.weight"
    Shape shape;          // (3C, C)
    bool decays;          // AdamW weight decay: the 2-D tensors (Weight, Embedding) only
    Component component;
    Role role;
    size_t fan_in;        // inputs per output: a linear layer's `in`, for its weight and its bias;
                          // 1 for embeddings and norms (one input per output)
    bool residual;        // part of a projection that writes into the residual stream
                          // (attn.c_proj, mlp.c_proj)
    size_t offset;        // where it starts in the parameter arena, in numbers
};

std::vector<TensorSpec> parameter_table(const GPTConfig& config);
size_t parameter_count(const GPTConfig& config);  // from the table; allocates no model

template <typename real>
struct BlockParameters {
    real* ln_1_w;       // (C) LayerNorm's γ or RMSNorm's gain
    real* ln_1_b;       // (C) or null (always null under RMSNorm)
    real* attn_w;       // (3C, C)  c_attn: rows Q, then K, then V; heads contiguous in each
    real* attn_b;       // (3C) or null
    real* attn_proj_w;  // (C, C)
    real* attn_proj_b;  // (C) or null
    real* ln_2_w;       // (C)
    real* ln_2_b;       // (C) or null
    real* fc_w;         // (F, C), F = mlp_fc_width(): 4C, or 2H for SwiGLU (rows W1, then W3)
    real* fc_b;         // (F) or null
    real* mlp_proj_w;   // (C, M), M = mlp_hidden(): 4C, or H for SwiGLU
    real* mlp_proj_b;   // (C) or null
};

// Views into one arena: the parameters, or (same layout) their gradients.
template <typename real>
struct ParameterTensors {
    real* wte;      // (V, C)
    real* wpe;      // (block_size, C); null with sinusoidal or rotary positions
    std::vector<BlockParameters<real>> h;  // L blocks
    real* ln_f_w;   // (C)
    real* ln_f_b;   // (C) or null
    real* lm_head;  // (V, C); the same pointer as wte when the weights are tied
};

// What the forward pass keeps for the backward pass, per block. N = B·T; F and M are the MLP's
// widths (BlockParameters). The two branch outputs
// (after attention's and the MLP's output projections) are not kept: each is written straight
// into the stream it is added to (res_2, res_3), because the backward of a sum needs no values.
// The model's ActivationPlan (config.h) decides the rest: attention keeps att or lse, and what a
// recompute setting recomputes is one buffer that every block shares (the first block's pointers in
// every block): under Recompute::Attention atty, att and lse; under Recompute::Block everything
// but res_3, which is the next block's input.
template <typename real>
struct BlockActivations {
    real* ln_1;       // (N, C)
    real* ln_1_mean;  // (N); null under RMSNorm, which subtracts no mean
    real* ln_1_rstd;  // (N)
    real* qkv;        // (N, 3C) as attention reads it: after rope and QK-norm, when on (in place)
    real* qk_rstd;    // (N, 2·NH) QK-norm's rstd per head of q, then of k; null without QK-norm
    real* att;        // (B, NH, T, T) attention probabilities (materialized attention); null with flash
    real* lse;        // (B, NH, T) each row's log Σ exp of its scores (flash attention); null otherwise
    real* atty;       // (N, C) heads' outputs, concatenated
    real* res_2;      // (N, C) the stream after attention: X + attn_proj(atty)
    real* ln_2;       // (N, C)
    real* ln_2_mean;  // (N) or null, as ln_1_mean
    real* ln_2_rstd;  // (N)
    real* fc;         // (N, F) before the activation (for SwiGLU each row is [gate | up])
    real* fc_act;     // (N, M) after it
    real* res_3;      // (N, C) the block's output: res_2 + mlp_proj(fc_act)
};

template <typename real>
struct ActivationTensors {
    real* pos_table;  // (block_size, C) the fixed sinusoidal table; null otherwise
    real* rope_cos;   // (block_size, hs/2) RoPE's cos θ and sin θ (rope_table); null without rope
    real* rope_sin;   // (block_size, hs/2)
    real* encoded;    // (N, C) token + position embeddings (after dropout)
    std::vector<BlockActivations<real>> h;
    real* ln_f;       // (N, C)
    real* ln_f_mean;  // (N) or null, as ln_1_mean
    real* ln_f_rstd;  // (N)
    real* logits;     // (N, V), after the soft cap when there is one (in place)
    real* probs;      // (N, V) softmax(logits), kept for the loss's backward, which overwrites it;
                      // logits' own memory when the plan keeps no logits
    real* losses;     // (N)
};

// Working space of the passes, reused by every block. The backward's gradients come first, one
// buffer each but dlogits (acts.probs' memory), in the order gpt_backward writes them
// (bind_scratch lays them out in another): each is written whole by the layer that produces it
// (layers.h), so none is zeroed first, except dx: the norms' backward adds into it, and
// gpt_backward zeroes it once.
template <typename real>
struct Scratch {
    real* dx;         // (N, C) gradient of the residual stream, updated block by block
    real* dlogits;    // (N, V) acts.probs' memory: the cross-entropy's backward writes it in place
    real* dln_f;      // (N, C) at ln_f's output
    real* ddrop;      // (N, C) at a dropout's input, given the gradient at its output (dropout on)
    real* dfc_act;    // (N, M)
    real* dfc;        // (N, F); in bf16 with GELU and no MLP bias not written: the rounded copy alone
    real* dln_2;      // (N, C) at ln_2's output
    real* datty;      // (N, C)
    real* dqkv;       // (N, 3C); in bf16 without Q/K/V bias, rope or QK-norm not written: as dfc
    real* dln_1;      // (N, C) at ln_1's output
    real* attention;  // attention's working space in both passes. Materialized: (B, NH, T, T), the
                      // forward's dropped probabilities (dropout on), the backward's dP, dA, dS
                      // (attention.h). Flash: a slice per thread (flash_attention.h), for either dtype
    size_t attention_numbers = 0;  // the numbers at `attention`
};

// Mixed precision (dtype bfloat16, float models only; gpt_use_bf16): the bf16 numbers the
// products read. The float weights, gradients, activations and scratch above stay as they are,
// but for the norms' outputs, fc_act and atty, which LayerNorm, GELU and flash attention then write
// in bf16 only (the products, and flash's own backward, are their only readers; gpt_choices.h);
// these are extra, allocated only when bf16 is on. Each linear layer's input is rounded once in
// the forward, by the layer that writes it, and kept, because the backward's dW = doutᵀ·inp reads
// it again (a copy of what the plan recomputes is shared by the blocks as its float buffer is, and
// made again with it). Attention's products take bf16 inputs too (lib/layers/flash_attention.h,
// attention.h), from one working space for all blocks.
struct Bf16Block {
    bf16* ln_1;    // (N, C)  c_attn's input
    bf16* atty;    // (N, C)  attn.c_proj's
    bf16* ln_2;    // (N, C)  mlp.c_fc's
    bf16* fc_act;  // (N, M)  mlp.c_proj's
};
struct Bf16Copies {
    Arena<bf16> weights_memory;     // the model's own copy; a replica views its model's
    Arena<bf16> acts_memory;
    bf16* weights = nullptr;        // (P) every parameter rounded, at its offset in the parameter arena;
                                    // kept fresh by the optimizer's pass (lib/optim/adamw.h)
    const float* params = nullptr;  // the float arena those offsets count from
    std::vector<Bf16Block> h;
    bf16* ln_f = nullptr;           // (N, C)  lm_head's input
    bf16* dout = nullptr;           // (N, widest linear output) the backward's rounded dout, reused
    const float* dout_of = nullptr; // the float gradient `dout` holds rounded, when the layer that wrote
                                    // it rounded it too; the next linear backward takes it (gpt_choices.h)
    bf16* attention = nullptr;      // materialized attention's bf16 working space (attention_bf16_scratch),
                                    // reused by every block: its q, k, v are rounded again in the backward,
                                    // not kept; null with flash attention, whose working space is float
    bool on() const { return weights != nullptr; }
    const bf16* copy_of(const float* w) const { return weights + (w - params); }
};

template <typename real>
struct GPT {
    GPTConfig config;
    int max_B = 0, max_T = 0;           // what the activation arenas were sized for
    std::vector<TensorSpec> table;      // parameter_table(config)
    size_t num_parameters = 0;
    Arena<real> params_memory, grads_memory, acts_memory, scratch_memory;
    Arena<int> tokens_memory;           // inputs and targets of the last forward
    ParameterTensors<real> params, grads;
    ActivationTensors<real> acts;
    Scratch<real> scratch;
    // The last forward pass: its sizes and what the backward needs to know about it.
    int B = 0, T = 0;
    int* inputs = nullptr;              // (max_B, max_T)
    int* targets = nullptr;             // (max_B, max_T)
    bool has_targets = false;
    bool training = false;
    uint64_t dropout_key = 0;
    double loss = 0;
    ActivationPlan plan;                // how attention runs, what the forward keeps (gpt_build's)
    Profile* profile = nullptr;         // when set, each layer's time is charged to it (build/bench)
    Bf16Copies mixed;                   // empty unless gpt_use_bf16 (dtype bfloat16)
};

// Allocates every arena for batches up to (max_B, max_T), laid out for `plan` (which attention
// runs, what the forward keeps): nothing is allocated after this. Flash attention's working space
// is a slice per thread of omp_get_max_threads() at this call (flash_attention.h). With
// `share_params_of`, the model is a replica for data-parallel threads (lib/train/trainer.h): its
// own gradients, activations and scratch, and views of the other model's parameters instead
// of an arena of its own; it runs the other model's plan.
template <typename real>
void gpt_build(GPT<real>& model, const GPTConfig& config, int max_B, int max_T,
               const GPT<real>* share_params_of = nullptr, ActivationPlan plan = {});
// Turns on mixed precision for a float model built by gpt_build: allocates the bf16 copies
// (Bf16Copies; a replica views share_params_of's weight copy) and rounds the weights into it.
// From then on the linear layers' products take bf16 inputs and the optimizer refreshes the copy.
void gpt_use_bf16(GPT<float>& model, const GPT<float>* share_params_of = nullptr);
// Rounds every weight into the bf16 copy again, after code other than the optimizer wrote the
// float weights (gpt_init, a checkpoint's weights); nothing when bf16 is off.
void gpt_round_weights(GPT<float>& model);

// Draws the initial weights from config.init with a generator seeded by `seed`. hg::Error for
// a replica (it would write into another model's weights).
template <typename real>
void gpt_init(GPT<real>& model, uint64_t seed);
// The arena of the model's own parameters, for code that writes all of them (gpt_init, a
// checkpoint's weights). hg::Error for a replica, which owns none.
template <typename real>
real* gpt_own_parameters(GPT<real>& model);

// How a forward pass runs: training turns dropout on, with masks drawn from dropout_key.
struct ForwardMode {
    bool training = false;
    uint64_t dropout_key = 0;
};

// idx (B, T) token ids; targets (B, T) or null (then no loss: returns 0). Fills
// acts.logits (B, T, V), soft-capped when the config caps them; returns the mean cross-entropy.
// With targets, a model whose plan keeps no logits holds the probabilities there afterwards.
// T may be shorter than block_size, never longer: every position encoding, rope included, is
// defined for positions 0 .. block_size-1 (rope's table has block_size rows), and a longer
// context is hg::Error. A sampler crops the context to its last block_size tokens.
template <typename real>
double gpt_forward(GPT<real>& model, const int* idx, const int* targets, int B, int T,
                   ForwardMode mode = {});
template <typename real>
void gpt_zero_grad(GPT<real>& model);
// Adds d(dloss · loss)/dθ into model.grads for the last forward (which needs targets).
template <typename real>
void gpt_backward(GPT<real>& model, real dloss = 1);

}  // namespace hg
