// count.h — what the course's verification suite counts: parameters per component, FLOPs per
// token, and the shape after every stage of a forward pass. All from the config alone: no
// model is allocated.
#pragma once
#include <string>
#include <vector>

#include "lib/config.h"
#include "lib/gpt.h"

namespace hg {

struct ParameterBreakdown {
    size_t embedding = 0;        // wte (+ wpe when learned)
    size_t attention = 0;        // c_attn and c_proj of every block, with their biases
    size_t mlp = 0;              // c_fc and c_proj of every block, with their biases
    size_t block_layernorm = 0;  // ln_1 and ln_2 of every block
    size_t final_layernorm = 0;  // ln_f
    size_t lm_head = 0;          // the unembedding (0 when tied: it is wte)
    size_t total = 0;
    size_t blocks() const { return attention + mlp + block_layernorm; }
    size_t rule_of_thumb = 0;    // 12·L·C²: the four C×C attention and two C×4C MLP matrices
};
ParameterBreakdown count_parameters(const GPTConfig& config);

// FLOPs per token, under Lesson 14's convention: a multiply-add is 2 FLOPs; a weight matmul
// costs 2 per parameter; the embedding lookup costs nothing; the LM head costs 2·C·V even when
// tied; the attention scores (q·kᵀ) and mix (att·v) cost 2·T·C each per layer, counted over
// the full T×T (causal masking would halve it), and have no weights.
struct FlopCount {
    double forward_weights = 0;  // 2 · (block parameters + C·V)
    double attention = 0;        // 4 · T · C · L at the given T
    double forward = 0;          // forward_weights + attention
    double training = 0;         // 3 × forward: the backward does two matmuls per forward one
    double training_weights = 0; // 3 × forward_weights (the lesson's "training" figure)
    int crossover_T = 0;         // T* = 4·C, where attention's 4·T·C equals the MLP's 16·C²
};
FlopCount count_flops(const GPTConfig& config, int T);

struct StageShape {
    std::string stage;  // "token + position embeddings", "block 0", ..., "logits"
    Shape shape;
};
std::vector<StageShape> shape_table(const GPTConfig& config, int B, int T);

}  // namespace hg
