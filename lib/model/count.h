// count.h — what the course's verification suite counts: parameters per component, FLOPs per
// token, and the shape after every stage of a forward pass. All from the config alone: no
// model is allocated.
#pragma once
#include <string>
#include <vector>

#include "lib/model/config.h"
#include "lib/model/gpt.h"

namespace hg {

struct ParameterBreakdown {
    size_t embedding = 0;        // wte (+ wpe when learned)
    size_t token_embedding = 0;  // wte alone
    size_t position_embedding = 0;  // wpe (0 with sinusoidal positions, a fixed table, and with
                                    // rope, which turns q and k instead)
    size_t attention = 0;        // c_attn and c_proj of every block, with their biases
    size_t mlp = 0;              // c_fc and c_proj of every block, with their biases (SwiGLU's
                                 // c_fc is two matrices stacked: three in all)
    size_t block_layernorm = 0;  // ln_1 and ln_2 of every block (LayerNorm γ, β or RMSNorm's gain)
    size_t final_layernorm = 0;  // ln_f
    size_t lm_head = 0;          // the unembedding (0 when tied: it is wte)
    size_t total = 0;
    size_t blocks() const { return attention + mlp + block_layernorm; }
    size_t rule_of_thumb = 0;    // the block matrices alone: 12·L·C² for the four C×C attention and
                                 // two C×4C MLP matrices (GELU, ReLU²); with SwiGLU's three C×H
                                 // matrices L·(4C² + 3·C·H), H = swiglu_hidden(C)
    size_t attention_biases = 0; // the Q, K, V and output-projection biases (inside attention)
};
ParameterBreakdown count_parameters(const GPTConfig& config);

// Lesson 14 counts without attention biases ("weight matrices and FFN biases, LayerNorm
// affines listed, attention biases omitted"): the config with BiasLayout::Lesson14 when it
// has LayerNorm biases (gpt2, course, lesson14 layouts), unchanged otherwise. Its GPT-2
// numbers (124,402,944 parameters, 247,229,952 forward FLOPs per token) are this count.
GPTConfig lesson14_convention(GPTConfig config);

// Lesson 14's parameter table, line for line as the lesson prints it (its labels, its
// spacing, the f32 size in MB): "Component | Params", Token embedding, Positional, Per-block,
// All blocks, Final LN, LM head, TOTAL, f32 size. Counts are the config's own (use
// lesson14_convention() first to count the lesson's way).
std::vector<std::string> lesson14_parameter_table(const GPTConfig& config);

// FLOPs per token, under Lesson 14's convention: a multiply-add is 2 FLOPs; a weight matmul
// costs 2 per parameter; the embedding lookup costs nothing; the LM head costs 2·C·V even when
// tied; the attention scores (q·kᵀ) and mix (att·v) cost 2·T·C each per layer, counted over
// the full T×T (causal masking would halve it), and have no weights. Elementwise work is not
// counted, as LayerNorm and GELU are not: RMSNorm, rope, QK-norm, SwiGLU's gating, ReLU² and the
// soft cap add nothing; SwiGLU's three matrices count through its parameters.
struct FlopCount {
    double forward_weights = 0;  // 2 · (block parameters + C·V)
    double attention = 0;        // 4 · T · C · L at the given T
    double forward = 0;          // forward_weights + attention
    double training = 0;         // 3 × forward: the backward does two matmuls per forward one
    double training_weights = 0; // 3 × forward_weights (the lesson's "training" figure)
    int crossover_T = 0;         // T* = 4·C, where attention's 4·T·C equals the MLP's 16·C²
};
FlopCount count_flops(const GPTConfig& config, int T);

// Lesson 14's Information lens: Chinchilla-optimal data D ≈ 20 tokens per parameter
// (Hoffmann et al. 2022), and training compute C ≈ 6·P·D FLOPs.
struct ComputeBudget {
    double parameters = 0;  // P
    double tokens = 0;      // D = 20 · P
    double flops = 0;       // C = 6 · P · D
};
ComputeBudget chinchilla_budget(size_t parameters);

struct StageShape {
    std::string stage;  // "token + position embeddings", "block 0", ..., "logits"
    Shape shape;
};
std::vector<StageShape> shape_table(const GPTConfig& config, int B, int T);

}  // namespace hg
